"""`mcptasks serve --reload`: a real server on 127.0.0.1 serving a copy of an example; editing the
file restarts it, and the new tool is served."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.extension import advertise
from processes import ROOT, clean_env, free_port, serving_http

EXTENSION_ID = "io.modelcontextprotocol/tasks"
TIMEOUT = 60.0
"""Upper bound of every wait; never a synchronisation delay."""

NEW_TOOL = '''

@app.tool()
def farewell(name: str = "world") -> str:
    """Say goodbye."""
    return f"Goodbye, {name}!"
'''


async def tool_names(url: str) -> set[str]:
    async with Client(url, extensions=[advertise(EXTENSION_ID)]) as client:
        return {tool.name for tool in (await client.list_tools()).tools}


@pytest.mark.anyio
async def test_a_changed_file_restarts_the_server_with_its_new_tool(tmp_path: Path) -> None:
    target = tmp_path / "hello.py"
    shutil.copy(ROOT / "examples" / "hello.py", target)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    log = tmp_path / "server.log"
    with serving_http(target, port=port, log=log, extra=("--reload",), cwd=tmp_path) as server:
        assert await tool_names(url) == {"hello"}
        source = target.read_text().replace('\nif __name__ == "__main__":\n    app.run()\n', "")
        target.write_text(source + NEW_TOOL)
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                if "farewell" in await tool_names(url):
                    break
            except Exception:  # restarting: refused connections meanwhile
                pass
            assert time.monotonic() < deadline, log.read_text()
            await anyio.sleep(0.1)
        assert server.poll() is None
    assert server.returncode == 0, log.read_text()
    assert_told_the_restart(log, target)


def assert_told_the_restart(log: Path, target: Path) -> None:
    """The supervisor said what it watches and which change restarted the server."""
    text = log.read_text()
    assert f"mcptasks: watching {target.resolve().parent} for changes (--reload)" in text, text
    assert f"mcptasks: {target.resolve()} changed; restarting the server" in text, text


def test_reload_needs_http() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcptasks", "serve", str(ROOT / "examples" / "hello.py"), "--reload"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=clean_env(),
        timeout=TIMEOUT,
    )
    assert done.returncode == 2, done
    assert done.stderr.strip().splitlines() == [
        "mcptasks: error: --reload needs --transport http (a stdio client cannot reconnect)"
    ], done.stderr


def test_reload_without_watchfiles_says_what_to_install(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "watchfiles.py").write_text('raise ImportError("watchfiles is not installed here")\n')
    serve = ["serve", str(ROOT / "examples" / "hello.py"), "--transport", "http", "--port", str(free_port())]
    done = subprocess.run(
        [sys.executable, "-m", "mcptasks", *serve, "--reload"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env=clean_env(PYTHONPATH=str(blocked)),
        timeout=TIMEOUT,
    )
    assert done.returncode == 2, done
    assert done.stderr.strip().splitlines() == [
        "mcptasks: error: --reload needs the 'watchfiles' package, which is not installed: "
        "pip install 'mcptasks[reload]'"
    ], done.stderr
