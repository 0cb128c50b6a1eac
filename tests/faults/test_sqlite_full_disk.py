"""A SQLite store on a disk that fills up under a running server, then is freed.

The disk is a 600 KB tmpfs of the test's own (mounting one needs root: the test skips, saying so,
otherwise), filled with a filler file until the kernel says ENOSPC. While it is full, creates are
refused with -32603 `store_unavailable` saying the disk is full, and the bodies that finish cannot
write their ends; once the filler is removed, every finished body's result is readable with its
own payload and no task is failed (in particular not as `worker_lost`: no server died).
"""

from __future__ import annotations

import errno
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_helpers import (
    INTERNAL_ERROR,
    STORE_UNAVAILABLE,
    assert_kept,
    assert_store_errors,
    describe_error,
    ended_bodies,
    fault_client,
    fault_server,
    wait_ended,
)
from mcp import MCPError

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

DISK = "600k"
TASKS = 10
FULL = 2.0
"""Seconds the disk stays full after the bodies finished (their ends meet it)."""
MAX_CREATES = 300
"""Creates tried on the full disk before one must be refused (SQLite may first reuse WAL space)."""


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 600 KB tmpfs mounted for this test, always unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root (mount -t tmpfs)")
    mount = tmp_path / "disk"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK},mode=0755", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a {DISK} tmpfs: {(mounted.stderr or mounted.stdout).strip()}")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def fill(disk: Path) -> Path:
    """Write a filler file until the disk has no byte left; the file."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for size in (65536, 4096, 512, 1):
            chunk = b"\0" * size
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return filler


async def test_a_full_disk_refuses_creates_clearly_and_keeps_every_finished_result(
    small_disk: Path, tmp_path: Path
) -> None:
    tag = f"full-{uuid.uuid4().hex[:8]}"
    gate = f"{tag}.go"
    store = f"sqlite:///{small_disk / 'tasks.db'}"  # an absolute path: sqlite:////...
    with fault_server(store, tmp_path / "server") as server:  # evidence off the small disk
        async with fault_client(server.url) as client:
            created = {}
            for n in range(TASKS):
                created[await client.start("finish", {"tag": tag, "n": n, "gate": gate})] = (tag, n)
            filler = fill(small_disk)
            refused: MCPError | None = None
            for n in range(TASKS, TASKS + MAX_CREATES):
                try:
                    created[await client.start("finish", {"tag": tag, "n": n, "gate": gate})] = (tag, n)
                except MCPError as exc:
                    refused = exc
                    break
            assert refused is not None, f"{MAX_CREATES} creates on a full disk were all accepted"
            (server.markers / gate).touch()  # the bodies end while the disk is full
            await wait_ended(server.markers, created)
            await client.poll_for(created, FULL)
            filler.unlink()
            final = await client.settle(created)
    ended = ended_bodies(server.markers)
    assert_kept(created, final, ended)
    assert refused.code == INTERNAL_ERROR, describe_error(refused)
    assert isinstance(refused.data, dict) and refused.data.get("reason") == STORE_UNAVAILABLE, describe_error(
        refused
    )
    assert isinstance(refused.data.get("retryAfterMs"), int), describe_error(refused)
    assert "full" in refused.message.lower(), (
        f"the message does not say the disk is full: {refused.message!r}"
    )
    assert_store_errors(client.errors)
