"""The `tools/call` decision table: every combination of request and tool maps to one route."""

from __future__ import annotations

import itertools

import pytest

from mcptasks._runtime.routes import Route, route_of

ANY = None

# (opted in, tasks allowed, fallback, task support, input before task, can ask) -> route; the first
# matching row wins, None matches anything.
TABLE: list[tuple[tuple[object, ...], Route]] = [
    ((True, True, ANY, ANY, True, ANY), Route.TASK_AFTER_INPUT),
    ((True, True, ANY, ANY, False, ANY), Route.TASK),
    ((ANY, ANY, "reject", ANY, ANY, ANY), Route.REFUSE),
    ((ANY, ANY, "tools", ANY, ANY, ANY), Route.STARTED_FOR_MODEL),
    ((ANY, ANY, "inline", "required", ANY, ANY), Route.REFUSE),
    ((ANY, True, "inline", "optional", ANY, True), Route.INLINE_ROUNDS),
    ((ANY, ANY, "inline", "optional", ANY, ANY), Route.INLINE),
]

COMBINATIONS = list(
    itertools.product(
        [True, False],
        [True, False],
        ["inline", "tools", "reject"],
        ["optional", "required"],
        [True, False],
        [True, False],
    )
)


def expected(combination: tuple[object, ...]) -> Route:
    for pattern, route in TABLE:
        if all(want is ANY or want == got for want, got in zip(pattern, combination, strict=True)):
            return route
    raise AssertionError(f"no row for {combination}")  # pragma: no cover


@pytest.mark.parametrize("combination", COMBINATIONS, ids=lambda c: "-".join(map(str, c)))
def test_each_combination_has_its_route(combination: tuple[object, ...]) -> None:
    opted_in, tasks_allowed, fallback, support, before, can_ask = combination
    route = route_of(
        opted_in=bool(opted_in),
        tasks_allowed=bool(tasks_allowed),
        fallback=fallback,  # type: ignore[arg-type]
        task_support=support,  # type: ignore[arg-type]
        input_before_task=bool(before),
        can_ask=bool(can_ask),
    )
    assert route is expected(combination)


def test_a_legacy_connection_never_gets_a_task_or_rounds() -> None:
    for opted_in, support, before, can_ask in itertools.product(
        [True, False], ["optional"], [True, False], [True, False]
    ):
        route = route_of(
            opted_in=opted_in,
            tasks_allowed=False,
            fallback="inline",
            task_support=support,  # type: ignore[arg-type]
            input_before_task=before,
            can_ask=can_ask,
        )
        assert route is Route.INLINE


def test_every_route_is_reachable() -> None:
    assert {expected(c) for c in COMBINATIONS} == set(Route)
