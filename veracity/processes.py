"""Process liveness, for whoever records a pid: the managed servers' state files
(:mod:`veracity.serving.process`) and the embedding stage's shard claims (:mod:`veracity.indexes.embedding`).
A module of its own below both, so neither imports the other."""

from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this machine (one of another user's counts; a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child counts as dead
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


__all__ = ["pid_alive"]
