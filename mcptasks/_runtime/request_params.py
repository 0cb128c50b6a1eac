"""Reading what a request's params and `_meta` say, refusing what they may not say.

`tasks/get|update|cancel` must be served and opted in (`opted_in_params`), their params validate
against the wire models (`parse_params`, `task_id_param`, which reads a plain `taskId` without
building a model, since it runs on every poll), and a `tools/call` may carry an idempotency key in
`_meta` (`idempotency_key`); answers must be values a store can keep (`checked_answers`). Every refusal is a `ProtocolError` with the JSON-RPC code to send.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from mcptasks._authoring.values import InvalidValue, check_json, check_text, storable_text
from mcptasks.errors import ProtocolError
from mcptasks.wire import (
    EXTENSION_ID,
    IDEMPOTENCY_META,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    REMOVED_TASK_METHODS,
    TASK_METHODS,
    CancelTaskParams,
    GetTaskParams,
    client_opted_in,
    missing_capability_data,
)


def idempotency_key(meta: Mapping[str, Any] | None) -> str | None:
    """The idempotency key a request carries in `_meta`, if any (-32602 when it is not a string)."""
    if not meta or IDEMPOTENCY_META not in meta:
        return None
    key = meta[IDEMPOTENCY_META]
    if not isinstance(key, str) or not 0 < len(key) <= 256:
        raise ProtocolError(
            INVALID_PARAMS, f"_meta[{IDEMPOTENCY_META!r}] must be a string of 1-256 characters"
        )
    try:
        check_text(key, f"_meta[{IDEMPOTENCY_META!r}]")
    except InvalidValue as exc:
        raise ProtocolError(INVALID_PARAMS, str(exc)) from None
    return key


def checked_answers(responses: Mapping[str, Any]) -> Mapping[str, Any]:
    """`responses` (`inputResponses`, by key) once every answer is a value a store can keep and
    a client can be sent; -32602 naming the key and the reason otherwise (such as a string
    holding a lone surrogate, which UTF-8 cannot encode), so nothing of them is recorded."""
    for key, answer in responses.items():
        try:
            check_text(str(key), "an inputResponses key")
            check_json(answer, f"inputResponses[{key!r}]")
        except InvalidValue as exc:
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid inputResponses: {exc}; no answer was recorded",
                {"reason": "invalid_value", "key": storable_text(str(key))},
            ) from None
    return responses


def missing_extension_error(what: str) -> ProtocolError:
    """The -32021 error for a request that needs the tasks extension but did not declare it."""
    return ProtocolError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"{what} requires the client capability extensions[{EXTENSION_ID!r}] in this request's _meta",
        missing_capability_data(),
    )


def parse_params(model: type[BaseModel], method: str, params: Mapping[str, Any]) -> Any:
    """`params` as `model` validates them; -32602 naming the first invalid field otherwise."""
    try:
        return model.model_validate(dict(params))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "params"
        raise ProtocolError(
            INVALID_PARAMS, f"Invalid params for {method}: {where}: {first['msg']}", {"field": where}
        ) from None


def opted_in_params(
    method: str, params: Mapping[str, Any] | None, meta: Mapping[str, Any] | None, tasks_allowed: bool
) -> Mapping[str, Any]:
    """`params` of a `tasks/*` request (`{}` for none) once the method is served and the request
    opted in (`meta`, default `params["_meta"]`); -32601, -32602 or -32021 otherwise."""
    if method in REMOVED_TASK_METHODS or method not in TASK_METHODS or not tasks_allowed:
        raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method}")
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise ProtocolError(INVALID_PARAMS, f"Invalid params for {method}: params must be an object")
    if meta is None:
        raw_meta = params.get("_meta")
        meta = raw_meta if isinstance(raw_meta, Mapping) else None
    if not client_opted_in(dict(meta) if meta is not None else None):
        raise missing_extension_error(method)
    return params


def task_id_param(
    model: type[GetTaskParams | CancelTaskParams], method: str, params: Mapping[str, Any]
) -> str:
    """`params.taskId` as `model` validates it; plain params (a non-empty string id, `_meta` absent
    or an object) are read as they are, without building the model (this runs on every poll)."""
    task_id = params.get("taskId")
    meta = params.get("_meta")
    if type(task_id) is str and task_id and "task_id" not in params and (meta is None or type(meta) is dict):
        return task_id
    parsed: GetTaskParams | CancelTaskParams = parse_params(model, method, params)
    return parsed.task_id
