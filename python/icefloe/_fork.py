"""Arrow Flight (gRPC) and fork: a process forked after its parent used
Flight cannot use it (gRPC's threads are not in the child). Such a child gets
a clear error instead of a hang (docs: README, "DataLoader workers")."""

from __future__ import annotations

import gc
import os
import weakref
from typing import Any

from .errors import Error

# gRPC (inside Arrow Flight) cannot be used in a process forked after it was
# used: the child hangs. We remember which process first used it so a forked
# DataLoader worker fails with a clear error instead (see check_fork_safe).
_flight_pid: int | None = None


class ForkedAfterFlightError(Error, RuntimeError):
    """This process was forked after its parent used Arrow Flight."""


def check_fork_safe() -> None:
    """Raises ForkedAfterFlightError in a process forked after Flight was used."""
    if _flight_pid is not None and _flight_pid != os.getpid():
        raise ForkedAfterFlightError(
            "this process was forked after its parent used Arrow Flight (gRPC), which "
            "cannot work after fork; give the DataLoader multiprocessing_context='forkserver' "
            "(or 'spawn'), or create it before the parent talks to the cluster")


def note_flight_use() -> None:
    global _flight_pid
    check_fork_safe()
    _flight_pid = os.getpid()


# A forked child has none of gRPC's threads, so destroying a Flight client or
# stream it inherited waits for them forever: a DataLoader worker forked
# after Flight use hung as soon as its garbage collector freed one (a
# reference cycle from an old exception was enough). So at fork every live
# Flight object icefloe made is held, and in the child held for good, and
# every object the child inherits is kept out of its cycle collector
# (gc.freeze). The child then fails with ForkedAfterFlightError, never hangs.
_flight_objects: weakref.WeakSet = weakref.WeakSet()
_held_at_fork: list[Any] = []


def track(obj: Any) -> Any:
    """Remembers a Flight client or stream, to keep it alive across a fork."""
    _flight_objects.add(obj)
    return obj


def _before_fork() -> None:
    _held_at_fork[:] = list(_flight_objects)


def _after_fork_in_parent() -> None:
    _held_at_fork.clear()


def _after_fork_in_child() -> None:
    # _held_at_fork keeps the inherited Flight objects: never released here.
    if _flight_pid is not None:  # only where Flight was used: others fork as before
        gc.freeze()


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)
