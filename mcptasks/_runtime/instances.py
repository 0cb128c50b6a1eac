"""Engine instance ids that say which process they belong to.

An engine's tasks are normally declared lost when its heartbeat lease expires. When a server is
killed and restarted on the same machine, waiting a lease for that is needless: the new process can
see that the old one is gone. An id made by `new_instance_id` names the machine (a hash of the host
name, boot id and PID namespace), the process id and the process start time, so
`gone_from_this_host` can tell a dead process (no such pid, or the pid now belongs to a newer
process) from a live one. Ids of other machines or PID namespaces (another container), and ids
chosen by the user, are never judged: for those the lease decides.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import socket
from functools import lru_cache

__all__ = ["gone_from_this_host", "new_instance_id"]

_PATTERN = re.compile(r"^([0-9a-f]{12})-([0-9]+)-([0-9]+)-[0-9a-f]{8}$")


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read()
    except OSError:
        return None


@lru_cache(maxsize=1)
def _node() -> str:
    # Process ids are only comparable within one PID namespace of one boot of one machine:
    # containers sharing a host name (host networking) still get different nodes.
    boot = _read("/proc/sys/kernel/random/boot_id") or ""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    seed = f"{socket.gethostname()}\0{boot.strip()}\0{namespace}"
    return hashlib.sha256(seed.encode()).hexdigest()[:12]


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux); None when unknown; -1 for a
    zombie (it has exited and waits for its parent to collect it)."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    try:  # the command name (field 2) may hold spaces and parentheses: split after the last ")"
        fields = stat.rsplit(")", 1)[1].split()
        return -1 if fields[0] in ("Z", "X") else int(fields[19])
    except (IndexError, ValueError):
        return None


def new_instance_id() -> str:
    """A fresh instance id naming this machine, process and process start time, plus 32 random bits."""
    pid = os.getpid()
    return f"{_node()}-{pid}-{max(_start_time(pid) or 0, 0)}-{secrets.token_hex(4)}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def gone_from_this_host(instance_id: str) -> bool:
    """True only when `instance_id` was made by `new_instance_id` on this machine (since its last
    boot) and its process no longer runs. False when alive, foreign, or unknown."""
    match = _PATTERN.match(instance_id)
    if match is None or match.group(1) != _node():
        return False
    pid, started = int(match.group(2)), int(match.group(3))
    if not _alive(pid):
        return True
    now = _start_time(pid)
    if started == 0:  # no start time recorded (no /proc): a live pid is taken at its word
        return now == -1
    return now is not None and now != started
