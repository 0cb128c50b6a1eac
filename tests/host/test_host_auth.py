"""Task ownership over authenticated Streamable HTTP: each bearer token only ever sees its own tasks.

The server is a `TaskServer` with the SDK's `token_verifier` + `AuthSettings` (extra keyword
arguments go to `MCPServer`); the task owner is the token's principal.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.server.auth.settings import AuthSettings
from sdk_helpers import (
    ELICITING,
    TIMEOUT,
    HostApp,
    RawClient,
    StaticTokens,
    accept,
    as_user,
    bearer,
    mcp_error,
    serve_http,
)

from mcptasks.wire import INVALID_PARAMS

pytestmark = pytest.mark.anyio


def authenticated_host(**options: Any) -> HostApp:
    return HostApp(
        **options,
        token_verifier=StaticTokens("alice", "bob"),
        auth=AuthSettings(
            issuer_url="http://127.0.0.1:9/",
            resource_server_url="http://127.0.0.1:9/mcp",
            validate_token_resource=False,
        ),
    )


async def test_tasks_are_invisible_to_another_principal() -> None:
    host = authenticated_host()
    async with (
        serve_http(host.app.streamable_http_app()) as url,
        as_user(url, "alice") as alice,
        as_user(url, "bob") as bob,
    ):
        task_id = (await alice.start("gated", {"label": "alice-job"}))["taskId"]
        await alice.wait(task_id, lambda t: t.get("statusMessage") == "alice-job: waiting")

        for attempt in (
            lambda: bob.get(task_id),
            lambda: bob.update(task_id, {"anything": {}}),
            lambda: bob.cancel(task_id),
        ):
            error = await mcp_error(attempt())
            assert error.code == INVALID_PARAMS

        # Bob's cancel did nothing; Alice still sees and finishes her task.
        mine = await alice.get(task_id)
        assert mine["status"] == "working"
        host.release("alice-job")
        done = await alice.finish(task_id)
        assert done["status"] == "completed"

        # Bob's own tasks are his, and Alice cannot see them either.
        bobs = (await bob.start("quick", {"n": 2}))["taskId"]
        assert (await bob.finish(bobs))["status"] == "completed"
        assert (await mcp_error(alice.get(bobs))).code == INVALID_PARAMS


async def test_a_foreign_answer_cannot_resume_an_input_required_task() -> None:
    host = authenticated_host()
    async with (
        serve_http(host.app.streamable_http_app()) as url,
        as_user(url, "alice") as alice,
        as_user(url, "bob") as bob,
    ):
        task_id = (await alice.start("ask", {"filename": "secret.txt"}))["taskId"]
        (key,) = (await alice.wait_input(task_id, count=1))["inputRequests"]

        error = await mcp_error(bob.update(task_id, {key: accept(confirm=True)}))
        assert error.code == INVALID_PARAMS
        still = await alice.get(task_id)
        assert still["status"] == "input_required"
        assert set(still["inputRequests"]) == {key}

        await alice.update(task_id, {key: accept(confirm=False)})
        done = await alice.finish(task_id)
        assert done["result"]["content"][0]["text"] == "kept secret.txt"


async def test_owner_isolation_over_raw_http_and_unauthenticated_requests() -> None:
    host = authenticated_host()
    async with (
        serve_http(host.app.streamable_http_app()) as url,
        bearer("alice") as alice_http,
        bearer("bob") as bob_http,
        bearer("mallory") as bad_http,
    ):
        alice = RawClient(alice_http, url)
        bob = RawClient(bob_http, url)
        task_id = (await alice.call("quick", {"n": 1})).result["taskId"]

        foreign = await bob.send("tasks/get", {"taskId": task_id})
        assert foreign.error["code"] == INVALID_PARAMS
        assert foreign.status == 400
        assert (await alice.finish(task_id))["status"] == "completed"

        # Unknown and missing tokens never reach the extension.
        rejected = await bad_http.post(url, json={}, headers={"Content-Type": "application/json"})
        assert rejected.status_code == 401

        # MRTR state is bound to the principal: Bob cannot replay Alice's round.
        alice_mrtr = RawClient(alice_http, url, capabilities=ELICITING)
        bob_mrtr = RawClient(bob_http, url, capabilities=ELICITING)
        state = (await alice_mrtr.call("before")).result["requestState"]
        answers = {"user_name": accept(name="Bob")}
        replayed = await bob_mrtr.call("before", inputResponses=answers, requestState=state)
        assert "error" in replayed.message
        created = (await alice_mrtr.call("before", inputResponses=answers, requestState=state)).result
        assert created["resultType"] == "task"
        with anyio.fail_after(TIMEOUT):
            assert (await alice_mrtr.finish(created["taskId"]))["status"] == "completed"


async def test_fallback_tools_and_idempotency_keys_are_scoped_to_the_principal() -> None:
    host = authenticated_host(fallback="tools")
    key = {"io.github.mcptasks/idempotencyKey": "nightly"}
    async with (
        serve_http(host.app.streamable_http_app()) as url,
        as_user(url, "alice") as alice,
        as_user(url, "bob") as bob,
    ):
        alices = (await alice.start("gated", {"label": "nightly"}, meta=key))["taskId"]
        bobs = (await bob.start("gated", {"label": "nightly"}, meta=key))["taskId"]
        assert alices != bobs

        # Bob can neither read nor cancel Alice's task through the generated tools.
        peek = await bob.client.call_tool("task_status", {"taskId": alices})
        assert peek.is_error is True
        await bob.client.call_tool("task_cancel", {"taskId": alices})
        mine = await alice.client.call_tool("task_status", {"taskId": alices})
        assert mine.is_error is False
        assert mine.structured_content is not None
        assert mine.structured_content["status"] == "working"

        host.release("nightly")
        assert (await alice.finish(alices))["status"] == "completed"
        assert (await bob.finish(bobs))["status"] == "completed"
