"""Processes of a managed server: liveness, its process group, ending it, ports and its log.

A managed server runs in its own session (``start_new_session``), so the group's id is the leader's pid
and the group outlives a dead leader (vLLM's engine core and workers): everything here works on the group.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

from veracity.errors import ServerError
from veracity.processes import pid_alive  # noqa: F401 (part of this module's API)

STOP_GRACE_S = 20.0  # seconds a server gets to shut down after SIGTERM before SIGKILL


def group_members(pgid: int) -> list[int]:
    """Live processes (zombies excluded) of process group ``pgid``: a managed server's API process is its
    group's leader and vLLM's engine core and workers its members, so the group outlives a dead leader."""
    out = []
    try:
        entries = os.listdir("/proc")
    except OSError:  # no /proc (not Linux): fall back to the leader alone
        return [pgid] if pid_alive(pgid) else []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # after the command name: state, ppid, pgrp, ...
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            out.append(int(entry))
    return sorted(out)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)  # our own child: collect it so that it does not linger as a zombie
    except (ChildProcessError, OSError):
        pass


def terminate_group(pgid: int, grace_s: float | None = None) -> list[int]:
    """End process group ``pgid`` (SIGTERM, then SIGKILL after ``grace_s``) whether or not its leader still
    lives; returns the pids still alive afterwards (empty when the whole group is gone)."""
    def signal_group(sig: int) -> None:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:  # not ours to signal as a group: signal the members we can
            for pid in group_members(pgid):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass

    if not group_members(pgid):
        _reap(pgid)
        return []
    signal_group(signal.SIGTERM)
    grace = STOP_GRACE_S if grace_s is None else grace_s
    for sig_deadline, last in ((grace, False), (10.0, True)):
        deadline = time.time() + sig_deadline
        while time.time() < deadline:
            _reap(pgid)
            if not group_members(pgid):
                return []
            time.sleep(0.2)
        if not last:
            signal_group(signal.SIGKILL)
    _reap(pgid)
    return group_members(pgid)


def terminate(pid: int, grace_s: float | None = None) -> None:
    """End the process group led by ``pid``; a ServerError when some of it survives SIGKILL."""
    left = terminate_group(pid, grace_s)
    if left:
        raise ServerError(f"{len(left)} process(es) of the server (pids {', '.join(map(str, left))}) "
                          "survived "
                          "SIGKILL", hint="they may belong to another user; end them with `kill -9`")


# -- ports ----------------------------------------------------------------------------------------------
def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# -- the log ---------------------------------------------------------------------------------------------
def tail(path: Path, n: int = 15) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def last_line(log: Path) -> str:
    lines = [ln.strip() for ln in tail(log, 20).splitlines() if ln.strip()]
    return lines[-1][-200:] if lines else "no output"


def last_error_line(log: Path) -> str:
    """The most telling line of a failed start-up log (the last exception line, else the last line)."""
    lines = [ln.strip() for ln in tail(log, 200).splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Error" in ln or "error:" in ln:
            return ln[-240:]
    return lines[-1][-240:] if lines else "no output"
