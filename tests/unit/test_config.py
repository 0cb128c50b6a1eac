"""`EngineConfig`: validation, the environment, and the engine reading it."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from mcptasks import EngineConfig, Limits
from mcptasks.lowlevel import StoreRetry, TaskEngine, TasksProtocol

ROOT = Path(__file__).resolve().parent.parent.parent


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("lease_ttl", 0),
        ("lease_ttl", float("nan")),
        ("max_concurrent", 0),
        ("max_concurrent", 2.5),
        ("poll_limit", "sometimes"),
        ("poll_tolerance", 1.5),
        ("wedge_limit", 4),
        ("fallback", "maybe"),
        ("parked_limit", -1),
        ("parked_seconds", 0),
        ("keepalive", -1),
        ("run_tasks", "yes"),
        ("limits", {"max_active": 3}),
        ("secret", ""),
        ("instance_id", ""),
    ],
)
def test_an_invalid_value_names_the_field_and_the_value(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=rf"^EngineConfig\.{field} .*got {re.escape(repr(value))}$"):
        EngineConfig(**{field: value})


def test_the_config_is_frozen_and_replace_validates() -> None:
    config = EngineConfig(lease_ttl=30)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.lease_ttl = 5  # type: ignore[misc]
    assert dataclasses.replace(config, fallback="tools").lease_ttl == 30
    with pytest.raises(ValueError, match="lease_ttl"):
        dataclasses.replace(config, lease_ttl=-1)


def test_the_secret_stays_out_of_the_repr() -> None:
    assert "hunter2" not in repr(EngineConfig(secret="hunter2"))


def test_from_env_reads_every_kind_of_field() -> None:
    environ = {
        "MCPTASKS_LEASE_TTL": "30",
        "MCPTASKS_MAX_CONCURRENT": "4",
        "MCPTASKS_RUN_TASKS": "false",
        "MCPTASKS_HEARTBEAT_THREAD": "off",
        "MCPTASKS_FALLBACK": "tools",
        "MCPTASKS_ADAPTIVE_POLL_MAX": "none",
        "MCPTASKS_SECRET": "s" * 32,
        "MCPTASKS_INSTANCE_ID": "pod-7",
        "UNRELATED": "x",
    }
    config = EngineConfig.from_env(EngineConfig(adaptive_poll_max=60, claim_interval=2), environ)
    assert (config.lease_ttl, config.max_concurrent, config.run_tasks) == (30.0, 4, False)
    assert (config.heartbeat_thread, config.fallback, config.adaptive_poll_max) == (False, "tools", None)
    assert (config.secret, config.instance_id) == ("s" * 32, "pod-7")
    assert config.claim_interval == 2  # unset variables keep the base's values
    assert EngineConfig.from_env(environ={}) == EngineConfig()


@pytest.mark.parametrize(
    ("variable", "value", "fragment"),
    [
        ("MCPTASKS_LEASE_TTL", "soon", "expected a number"),
        ("MCPTASKS_PUSH", "maybe", "expected true or false"),
        ("MCPTASKS_POLL_LIMIT", "sometimes", "expected one of off, delay, reject"),
        ("MCPTASKS_MAX_CONCURRENT", "1.5", "expected a whole number or none"),
    ],
)
def test_from_env_names_a_variable_that_does_not_parse(variable: str, value: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=rf"^{variable}='{re.escape(value)}': {fragment}"):
        EngineConfig.from_env(environ={variable: value})


def test_from_env_names_a_value_out_of_range() -> None:
    with pytest.raises(ValueError, match=r"EngineConfig\.lease_ttl .*got -1\.0 \(from the environment\)"):
        EngineConfig.from_env(environ={"MCPTASKS_LEASE_TTL": "-1"})


def test_the_engine_reads_its_config_and_refuses_assignments() -> None:
    limits, retry = Limits(threads=2), StoreRetry(budget=5)
    config = EngineConfig(lease_ttl=3, limits=limits, store_retry=retry, instance_id="a", run_tasks=False)
    engine = TaskEngine(config=config)
    assert (engine.lease_ttl, engine.limits, engine.store_retry, engine.run_tasks) == (
        3,
        limits,
        retry,
        False,
    )
    assert engine.instance_id == "a"
    with pytest.raises(AttributeError, match=r"EngineConfig\(lease_ttl=\.\.\.\)"):
        engine.lease_ttl = 10
    engine.configure(dataclasses.replace(config, lease_ttl=10, instance_id="b"))
    assert (engine.lease_ttl, engine.instance_id) == (10, "b")


def test_the_protocol_takes_its_settings_from_the_engine() -> None:
    engine = TaskEngine(config=EngineConfig(fallback="reject", immediate_results=False, parked_limit=7))
    protocol = TasksProtocol(engine)
    assert (protocol.fallback, protocol.immediate_results, protocol.parked.limit) == ("reject", False, 7)
    protocol.configure(EngineConfig(parked_seconds=5))
    assert (protocol.fallback, protocol.parked.limit, protocol.parked.seconds) == ("inline", 1000, 5.0)


def test_the_reference_page_lists_every_field_with_its_variable_and_flag() -> None:
    page = (ROOT / "docs" / "reference" / "configuration.md").read_text()
    page = page.split("## EngineConfig", 1)[1].split("\n## ", 1)[0]
    rows = {
        match.group(1): match.group(0) for match in re.finditer(r"^\| `([a-z_]+)` \|.*$", page, re.MULTILINE)
    }
    flags = {"run_tasks": "--enqueue-only", "lease_ttl": "--lease-ttl", "max_concurrent": "--concurrency"}
    for spec in dataclasses.fields(EngineConfig):
        assert spec.name in rows, f"docs/reference/configuration.md has no row for {spec.name}"
        if spec.name not in ("limits", "store_retry"):
            assert f"`MCPTASKS_{spec.name.upper()}`" in rows[spec.name], rows[spec.name]
        if spec.name in flags:
            assert f"`{flags[spec.name]}`" in rows[spec.name], rows[spec.name]
