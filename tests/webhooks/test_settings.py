"""Webhook settings: a bad URL or secret stops the start with a message naming the flag; the
environment variables; what a destination check refuses; what each answer means."""

from __future__ import annotations

import ipaddress
import subprocess
from pathlib import Path

import pytest
from processes import ROOT, clean_env, cli_command
from webhook_helpers import SECRET

from mcptasks import EngineConfig, MemoryTaskStore
from mcptasks._runtime.webhooks.sender import judge
from mcptasks._runtime.webhooks.targets import RefusedAddress, destination, endpoints, is_global
from mcptasks.lowlevel import TaskEngine

HELLO = str(ROOT / "examples" / "hello.py")


@pytest.mark.parametrize(
    ("urls", "secret", "fragment"),
    [
        (("ftp://example.com/x",), SECRET, "--webhook / MCPTASKS_WEBHOOKS: 'ftp://example.com/x' is not"),
        (
            ("https://example.com/x",),
            "abc",
            "--webhook-secret / MCPTASKS_WEBHOOK_SECRET: the secret must start",
        ),
        (("https://example.com/x",), "whsec_!!!", "is not base64"),
        (("https://example.com/x",), "whsec_c2hvcnQ=", "24 to 64 bytes, not 5"),
        (("https://example.com:99999/x",), SECRET, "has an invalid port"),
    ],
)
def test_a_bad_setting_is_refused_naming_the_flag(
    urls: tuple[str, ...], secret: str | None, fragment: str
) -> None:
    with pytest.raises(ValueError) as caught:
        EngineConfig(webhooks=urls, webhook_secret=secret)
    assert fragment in str(caught.value)
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    ("urls", "secret", "fragment"),
    [
        (("https://example.com/x",), None, "needs a signing secret: set --webhook-secret"),
        (("http://10.1.2.3/x",), SECRET, "allow such destinations with --webhook-allow-private"),
        (("http://[::1]:8/x",), SECRET, "allow such destinations with --webhook-allow-private"),
    ],
)
@pytest.mark.anyio
async def test_settings_that_need_each_other_are_checked_when_the_engine_starts(
    urls: tuple[str, ...], secret: str | None, fragment: str
) -> None:
    """The environment and the flags may each bring a part (the URL, the secret, the allow flag),
    so the pair is checked once the settings are final: by `serve` before it listens, and when an
    engine starts."""
    config = EngineConfig(webhooks=urls, webhook_secret=secret)  # each field is well formed
    with pytest.raises(ValueError) as caught:
        async with TaskEngine(MemoryTaskStore(), config=config):
            pass
    assert fragment in str(caught.value)


def test_the_environment_lists_comma_separated_urls() -> None:
    config = EngineConfig.from_env(
        environ={
            "MCPTASKS_WEBHOOKS": "https://a.example/h, https://b.example/h?t=1",
            "MCPTASKS_WEBHOOK_SECRET": SECRET,
            "MCPTASKS_WEBHOOK_ALLOW_PRIVATE": "yes",
        }
    )
    assert config.webhooks == ("https://a.example/h", "https://b.example/h?t=1")
    assert config.webhook_allow_private is True
    assert SECRET not in repr(config)
    shown = [e.shown for e in endpoints(config.webhooks, SECRET, False)]
    assert shown == ["https://a.example/h", "https://b.example/h"]  # no query: it may hold a token


def test_serve_refuses_a_webhook_without_a_secret(tmp_path: Path) -> None:
    done = subprocess.run(
        cli_command("serve", HELLO, "--webhook", "https://example.com/h"),
        capture_output=True, text=True, env=clean_env(), cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert "--webhook / MCPTASKS_WEBHOOKS needs a signing secret: set --webhook-secret" in done.stderr


def test_serve_takes_the_urls_from_the_environment_and_the_secret_from_a_flag(tmp_path: Path) -> None:
    done = subprocess.run(
        cli_command("serve", HELLO, "--webhook-secret", SECRET, "--webhook-allow-private"),
        capture_output=True, text=True, cwd=tmp_path, timeout=60, stdin=subprocess.DEVNULL,
        env=clean_env(MCPTASKS_WEBHOOKS="http://127.0.0.1:9/in"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "  webhooks  http://127.0.0.1:9/in (task events, signed)" in done.stderr


def test_serve_refuses_a_private_address_without_the_flag(tmp_path: Path) -> None:
    done = subprocess.run(
        cli_command("serve", HELLO, "--webhook", "http://192.168.1.20/in"),
        capture_output=True, text=True, cwd=tmp_path, timeout=60, stdin=subprocess.DEVNULL,
        env=clean_env(MCPTASKS_WEBHOOK_SECRET=SECRET),
    )  # fmt: skip
    assert done.returncode != 0
    assert "'http://192.168.1.20/in' is a private, loopback or link-local address" in done.stderr
    assert "--webhook-allow-private" in done.stderr


def test_serve_says_which_extra_to_install(tmp_path: Path) -> None:
    done = subprocess.run(
        cli_command("serve", HELLO, "--webhook", "https://example.com/h", without="standardwebhooks"),
        capture_output=True, text=True, env=clean_env(MCPTASKS_WEBHOOK_SECRET=SECRET), cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert "pip install 'mcptasks[webhooks]'" in done.stderr, done.stderr


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
     "::1", "fe80::1", "fc00::1", "::ffff:127.0.0.1", "224.0.0.1", "240.0.0.1"],
)  # fmt: skip
def test_non_global_addresses_are_not_global(address: str) -> None:
    assert not is_global(ipaddress.ip_address(address))


@pytest.mark.anyio
async def test_a_destination_is_checked_on_its_resolved_address() -> None:
    with pytest.raises(RefusedAddress, match="localhost resolves to"):
        await destination("localhost", 80, allow_private=False)
    assert await destination("localhost", 80, allow_private=True) in ("127.0.0.1", "::1")
    assert await destination("93.184.215.14", 443, allow_private=False) == "93.184.215.14"


@pytest.mark.parametrize(
    ("status", "verdict", "reason"),
    [
        (200, "delivered", None), (204, "delivered", None),
        (301, "retry", "http_3xx"), (307, "retry", "http_3xx"),
        (400, "retry", "http_4xx"), (404, "retry", "http_4xx"), (429, "retry", "http_4xx"),
        (410, "gone", "http_4xx"), (413, "drop", "http_4xx"),
        (500, "retry", "http_5xx"), (503, "retry", "http_5xx"),
    ],
)  # fmt: skip
def test_what_an_answer_means(status: int, verdict: str, reason: str | None) -> None:
    attempt = judge(status)
    assert (attempt.verdict, attempt.reason) == (verdict, reason)


def test_retry_after_is_honoured_on_429_and_503_only() -> None:
    assert judge(429, "7").retry_after == 7.0
    assert judge(503, "2").retry_after == 2.0
    assert judge(500, "7").retry_after is None


def test_the_start_up_block_lists_the_endpoints_without_credentials(tmp_path: Path) -> None:
    done = subprocess.run(
        cli_command("serve", HELLO, "--webhook", "https://ops:pw@hooks.example.com/in?token=t0k", "--webhook",
                    "https://pager.example.com/in"),
        capture_output=True, text=True, env=clean_env(MCPTASKS_WEBHOOK_SECRET=SECRET), cwd=tmp_path, timeout=60,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    line = "  webhooks  https://hooks.example.com/in, https://pager.example.com/in (task events, signed)\n"
    assert line in done.stderr
    for secret in ("pw", "t0k", SECRET):
        assert secret not in done.stderr
