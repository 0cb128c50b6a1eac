"""Typed `tasks/*` and `subscriptions/listen` requests for `ClientSession.send_request`.

The params are validated by the models of `mcptasks.wire` (the ones the server validates with)
and sent as their JSON; each `tasks/*` request sets `name_param = "taskId"`, so the SDK sends the
`Mcp-Name` header over HTTP.
"""

from __future__ import annotations

from typing import Any, Literal

from mcp_types import Request, RequestParams, Result
from pydantic import ConfigDict

from mcptasks.wire import CancelTaskParams, GetTaskParams, UpdateTaskParams


def _params(model: GetTaskParams | CancelTaskParams | UpdateTaskParams) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


class GetTaskRequest(Request[dict[str, Any], Literal["tasks/get"]]):
    """`tasks/get`: `GetTaskRequest.of(task_id)`."""

    method: Literal["tasks/get"] = "tasks/get"
    params: dict[str, Any]
    name_param = "taskId"

    @classmethod
    def of(cls, task_id: str) -> GetTaskRequest:
        """The request for one task."""
        return cls(params=_params(GetTaskParams.model_validate({"taskId": task_id})))


class UpdateTaskRequest(Request[dict[str, Any], Literal["tasks/update"]]):
    """`tasks/update`: `UpdateTaskRequest.of(task_id, {key: response})`."""

    method: Literal["tasks/update"] = "tasks/update"
    params: dict[str, Any]
    name_param = "taskId"

    @classmethod
    def of(cls, task_id: str, responses: dict[str, Any]) -> UpdateTaskRequest:
        """The request answering input requests of one task by key."""
        params = UpdateTaskParams.model_validate({"taskId": task_id, "inputResponses": responses})
        return cls(params=_params(params))


class CancelTaskRequest(Request[dict[str, Any], Literal["tasks/cancel"]]):
    """`tasks/cancel`: `CancelTaskRequest.of(task_id)`."""

    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: dict[str, Any]
    name_param = "taskId"

    @classmethod
    def of(cls, task_id: str) -> CancelTaskRequest:
        """The request for one task."""
        return cls(params=_params(CancelTaskParams.model_validate({"taskId": task_id})))


class ListenTasksParams(RequestParams):
    """`subscriptions/listen` params naming task ids: `{"notifications": {"taskIds": [...]}}`."""

    notifications: dict[str, Any]


class ListenTasksRequest(Request[ListenTasksParams, Literal["subscriptions/listen"]]):
    """A `subscriptions/listen` for `notifications/tasks` of the given tasks."""

    method: Literal["subscriptions/listen"] = "subscriptions/listen"
    params: ListenTasksParams

    @classmethod
    def of(cls, *task_ids: str) -> ListenTasksRequest:
        """The request listening for the given tasks."""
        return cls(params=ListenTasksParams(notifications={"taskIds": list(task_ids)}))


class Ack(Result):
    """The empty acknowledgement of `tasks/update` and `tasks/cancel` (and a listen's close)."""

    model_config = ConfigDict(extra="allow")
