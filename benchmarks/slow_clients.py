"""Slowloris against `mcptasks serve`: what a legitimate client and the log see while many
connections hold a half-sent request head open.

    python benchmarks/slow_clients.py                      # 1,100 half-open, ulimit -n 1024, 40 s
    python benchmarks/slow_clients.py --serve-arg=--header-timeout=100000 \\
        --serve-arg=--max-connections=100000               # no read timeout, no connection bound

The server (`examples/hello.py` over HTTP on 127.0.0.1) runs with its open-file limit set to
`--nofile` (soft and hard). The benchmark opens `--connections` connections that each send
`POST /mcp HTTP/1.1` and one header line, and never the rest. Then, for `--duration` seconds, it
sends one legitimate `tools/list` at a time on a fresh connection, each given `--probe-timeout`
seconds to be answered, and reports how long the answered ones took, how many were not answered,
and how much the server's log (stdout and stderr) grew meanwhile.
"""

from __future__ import annotations

import argparse
import json
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VERSION = "2026-07-28"
HALF_HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _limit_files(nofile: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    return apply


def _start_server(port: int, nofile: int, log: Path, serve_args: list[str]) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "mcptasks", "serve", str(ROOT / "examples" / "hello.py")]
    command += ["--transport", "http", "--host", "127.0.0.1", "--port", str(port), *serve_args]
    with log.open("wb") as output:
        process = subprocess.Popen(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_limit_files(nofile),
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited with {process.returncode}:\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit("the server did not start in 60 s")


def _request(port: int) -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "slow-clients-bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}})
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
        f"MCP-Protocol-Version: {VERSION}\r\nMcp-Method: tools/list\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body.encode()


def probe(port: int, timeout: float) -> float | None:
    """Seconds until a `tools/list` on a new connection was answered 200; None if it was not
    within `timeout` (no connection, no answer, or another status)."""
    started = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.settimeout(max(0.01, timeout - (time.monotonic() - started)))
            sock.sendall(_request(port))
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
    except OSError:
        return None
    return time.monotonic() - started if answer.startswith(b"HTTP/1.1 200") else None


def open_half_heads(port: int, count: int) -> list[socket.socket]:
    """`count` connections that each sent a request line and one header, and nothing more."""
    held = []
    for _ in range(count):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(HALF_HEAD)
        except OSError:
            continue
        held.append(sock)
    return held


def closed_by_server(held: list[socket.socket]) -> int:
    """How many of `held` the server has closed (or reset)."""
    closed = 0
    for sock in held:
        sock.setblocking(False)
        try:
            sock.recv(65536)  # end of stream, or the answer that came with the close (a 408)
            closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    return closed


def _log_figures(log: Path) -> tuple[int, int, int, int]:
    text = log.read_bytes()
    return (
        len(text),
        text.count(b"\n"),
        text.count(b"Traceback"),
        text.count(b"out of system resource") + text.count(b"open files"),
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """One measurement; the figures as a dict."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = args.connections + 64
    if soft < needed:  # this process holds the half-open connections
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(needed, soft)), hard))
    port = _free_port()
    with tempfile.TemporaryDirectory() as directory:
        log = Path(directory) / "serve.log"
        server = _start_server(port, args.nofile, log, args.serve_arg)
        try:
            baseline = probe(port, args.probe_timeout)
            before = _log_figures(log)
            started = time.monotonic()
            held = open_half_heads(port, args.connections)
            opened = time.monotonic() - started
            answered: list[tuple[float, float]] = []
            missed = 0
            while time.monotonic() - started < args.duration:
                sent = time.monotonic() - started
                latency = probe(port, min(args.probe_timeout, args.duration - sent + 0.1))
                if latency is None:
                    missed += 1
                else:
                    answered.append((sent, latency))
                    time.sleep(0.5)
            after = _log_figures(log)
            closed = closed_by_server(held)
            for sock in held:
                sock.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
            if args.log:
                args.log.write_bytes(log.read_bytes())
    latencies = [latency for _, latency in answered]
    return {
        "connections": args.connections,
        "held_open": len(held),
        "opened_in_s": round(opened, 2),
        "nofile": args.nofile,
        "duration_s": args.duration,
        "serve_args": args.serve_arg,
        "baseline_answer_s": baseline,
        "answered": len(answered),
        "not_answered": missed,
        "first_answer_after_s": round(answered[0][0] + answered[0][1], 2) if answered else None,
        "answer_s_median": round(statistics.median(latencies), 4) if latencies else None,
        "answer_s_max": round(max(latencies), 4) if latencies else None,
        "closed_by_server": closed,
        "log_growth_bytes": after[0] - before[0],
        "log_growth_lines": after[1] - before[1],
        "log_tracebacks": after[2] - before[2],
        "log_resource_lines": after[3] - before[3],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=1100, help="half-open connections (1100)")
    parser.add_argument("--nofile", type=int, default=1024, help="the server's open-file limit (1024)")
    parser.add_argument("--duration", type=float, default=40.0, help="seconds of probing (40)")
    parser.add_argument("--probe-timeout", type=float, default=10.0, help="seconds per probe (10)")
    parser.add_argument(
        "--serve-arg", action="append", default=[], help="an extra `mcptasks serve` argument (repeatable)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--log", type=Path, help="keep the server's log in this file")
    args = parser.parse_args()
    figures = run(args)
    for name, value in figures.items():
        print(f"{name:24} {value}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
