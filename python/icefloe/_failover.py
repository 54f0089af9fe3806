"""What a reader does when a data node goes away mid-read (docs/protocol.md,
"Failover").

A read that breaks asks the head again where its data lives and resumes at
the exact point it reached (an epoch at its first incomplete batch; a range
or a random-access read whole, since it hands out nothing before it is
complete). The first retry is immediate: with replication the head names
another replica. A node that answers that it does not hold all the rows it is
asked for (:class:`RowsNotHeld`: restarted with part of its copy, before the
head has seen what it lost) counts as a break too, and is tried last for the
rest of that read. When every replica of some rows fails, the reader waits,
bounded by ``timeout_s`` and ``attempts``, while the head may still bring the
rows back: the dataset is ``degraded`` or ``healing``, or the head has not yet
noticed that the node died. Otherwise it raises :class:`DataUnavailable`
naming the dataset, the nodes and what to do.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from .errors import (
    Busy,
    Cancelled,
    DataUnavailable,
    Error,
    RowsNotHeld,
    ServerError,
    StreamBroken,
    Timeout,
    Unavailable,
)

log = logging.getLogger("icefloe")

# gRPC's words for a connection that died under a call; a peer killed mid-stream
# can surface as INTERNAL or CANCELLED with these rather than UNAVAILABLE.
_TRANSPORT_MARKERS = ("Stream removed", "Socket closed", "RST_STREAM", "Connection reset",
                      "Broken pipe", "GOAWAY", "failed to connect", "Connection refused",
                      "Endpoint read failed", "Stream closed")
# States in which the head may still bring lost rows back (decision 3 of issue 14).
WAIT_STATES = ("degraded", "healing")
_POLL_S = (0.2, 0.5, 1.0, 2.0)  # backoff between polls of the head
_LOG_EVERY_S = 10.0


def is_break(err: BaseException) -> bool:
    """Whether ``err`` (already mapped, from a node's stream) means the
    connection died or the stream reached its deadline, as opposed to an
    answer (bad ticket, out of memory, ...) that a retry repeats."""
    if isinstance(err, StreamBroken):
        return True
    if isinstance(err, Busy):
        return False
    if isinstance(err, (Unavailable, Timeout)):
        return True  # a stream past its deadline goes on from a fresh one
    if isinstance(err, (ServerError, Cancelled)):
        return any(m in str(err) for m in _TRANSPORT_MARKERS)
    return False


def is_refusal(err: BaseException | None) -> bool:
    """Whether ``err`` (or what it wraps) is a node's :class:`RowsNotHeld`."""
    for _ in range(8):  # a short chain: StreamBroken -> RowsNotHeld -> Flight error
        if err is None:
            return False
        if isinstance(err, RowsNotHeld):
            return True
        err = err.__cause__
    return False


def ordered(uris: list[str], refused: set[str] | frozenset[str]) -> list[str]:
    """``uris`` in order, those of nodes that refused rows in this read last."""
    return [u for u in uris if u not in refused] + [u for u in uris if u in refused]


def named(err: Error, dataset: str, nodes: list[str]) -> Error:
    """``err`` again, its message naming the dataset and node(s) it came from."""
    where = f"dataset {dataset!r}, node {', '.join(nodes)}"
    if where in str(err):
        return err
    if isinstance(err, (StreamBroken, DataUnavailable)):
        out: Error = type(err)(f"{where}: {err}", nodes=nodes, dataset=dataset)
    else:
        try:
            out = type(err)(f"{where}: {err}")
        except TypeError:  # an exception type with another signature: keep it
            return err
    out.__cause__ = err.__cause__ or err
    return out


def at_node(err: Error, location: str) -> Error:
    """``err`` again, its message naming the node it came from."""
    if location in str(err):
        return err
    try:
        out = type(err)(f"node {location}: {err}")
    except TypeError:
        return err
    out.__cause__ = err.__cause__ or err
    return out


class ReplicaAttempts:
    """The bookkeeping of reading one endpoint from its replicas in order: a
    replica whose connection breaks is recorded and the next one tried; any
    other error is an answer a retry would repeat, raised at once naming the
    node (and the dataset, when known). :meth:`exhausted` is the
    :class:`StreamBroken` to raise when no replica is left."""

    def __init__(self, dataset: str = "", refused: set[str] | None = None) -> None:
        self.dataset = dataset
        self.tried: list[str] = []
        self.last_error: BaseException | None = None
        # Nodes that said they lack rows (RowsNotHeld), shared with the read's Recovery.
        self.refused = refused if refused is not None else set()

    def failed(self, exc: Error, uri: str) -> None:
        """Records a break of ``uri``'s stream; raises ``exc`` if it is none."""
        if not is_break(exc):
            raise named(exc, self.dataset, [uri]) if self.dataset else at_node(exc, uri)
        if isinstance(exc, RowsNotHeld):
            self.refused.add(uri)
        self.tried.append(uri)
        self.last_error = exc

    def exhausted(self, rows: str = "some rows") -> StreamBroken:
        """The error once every replica failed (or the head listed none)."""
        what = f"dataset {self.dataset!r}: " if self.dataset else ""
        if self.last_error is None:  # the head knows no live node holding these rows
            return StreamBroken(f"{what}the head listed no node for {rows}", nodes=[],
                                dataset=self.dataset or None)
        broken = StreamBroken(f"{what}no replica answered for {rows} (node "
                              f"{', '.join(self.tried)}): {self.last_error}", nodes=self.tried,
                              dataset=self.dataset or None)
        broken.__cause__ = self.last_error
        return broken


class Recovery:
    """The bounded failover of one read (an epoch, a range, rows) of a dataset.

    ``broken(exc, position, stop)`` is called after each break with the
    position the read has reached; it returns when a new attempt is worth
    making (after waiting, if the head needs time) and raises
    :class:`DataUnavailable` when none is. Progress (a higher position)
    starts a new episode: each is bounded by ``attempts`` failures in a row
    and ``timeout_s`` of waiting; an episode that makes no progress ends in
    :class:`DataUnavailable`.
    """

    def __init__(self, describe: Callable[[str], dict[str, Any]],
                 status: Callable[[], dict[str, Any]], dataset: str, what: str, *,
                 timeout_s: float, attempts: int) -> None:
        self._describe = describe
        self._status = status
        self.dataset = dataset
        self.what = what
        self.timeout_s = timeout_s
        self.attempts = attempts
        self.breaks = 0
        self._deadline: float | None = None
        self._position = -1
        self._failures = 0  # consecutive, at the same position
        self._gave_dead_a_chance: set[str] = set()
        # Nodes that answered RowsNotHeld in this read: tried last from then on.
        self.refused: set[str] = set()

    def broken(self, exc: BaseException, position: int,
               stop: threading.Event | None = None) -> None:
        nodes = list(getattr(exc, "nodes", []) or [])
        refusal = is_refusal(exc)
        if refusal:
            self.refused.update(nodes)
        now = time.monotonic()
        self.breaks += 1
        if position > self._position:  # progress since the last break: a new episode
            self._position, self._failures = position, 0
            self._deadline = now + self.timeout_s
            self._gave_dead_a_chance.clear()
        self._failures += 1
        if self._failures > self.attempts:
            raise self._give_up(exc, nodes, f"{self.attempts} failovers in a row failed")
        at = f" at batch {position}" if self.what == "epoch" else ""
        # A stream past its deadline is routine (stream_timeout_s): no warning.
        cause = exc.__cause__ if isinstance(exc, StreamBroken) else exc
        level = logging.INFO if isinstance(cause, Timeout) else logging.WARNING
        log.log(level, "icefloe: %s of dataset %r broke%s (%s); failing over (attempt %d of "
                "at most %d)", self.what, self.dataset, at, first_line(exc), self._failures,
                self.attempts)
        if self._failures == 1:
            return  # at once: the head lists another replica first
        self._wait_for_head(exc, nodes, stop, refusal)

    def _wait_for_head(self, exc: BaseException, nodes: list[str],
                       stop: threading.Event | None, refusal: bool = False) -> None:
        """Returns once the head may serve the rows again; raises if it will not.

        After a refusal (``refusal``: the nodes answer but lack rows) a dataset
        the head calls ``ready`` is tried again after each pause, backing off
        with the failures in a row: the head repairs the rows once it has polled
        the node, and may not pass through ``degraded`` where a poll sees it."""
        assert self._deadline is not None
        polls = 0
        missing_first: int | None = None
        last_log = time.monotonic()
        started = last_log
        while True:
            desc = self._describe(self.dataset)  # an evicted dataset: NotFound, raised
            state = str(desc.get("state", ""))
            alive = {n.get("location") for n in self._status().get("nodes", [])
                     if n.get("state") == "alive"}
            heal_error = desc.get("heal_error")
            retry_after_pause = False
            if state == "ready" and refusal:
                retry_after_pause = True
            elif state == "ready":
                unnoticed = [n for n in nodes if n in alive]
                if not unnoticed:
                    # The head knows these nodes are gone and calls the dataset
                    # ready: it re-placed the rows, or it cannot (no healing).
                    # One more attempt tells which.
                    tried = set(nodes) or {""}  # "": the head listed no node at all
                    if tried <= self._gave_dead_a_chance:
                        raise self._give_up(exc, nodes, "the head lists no live node for "
                                            "these rows and is not healing them")
                    self._gave_dead_a_chance.update(tried)
                    return
                # Else the head has not yet noticed the node died: wait for it.
            elif state not in WAIT_STATES:
                raise self._give_up(exc, nodes, f"the dataset is {state!r}")
            else:
                missing = desc.get("slices_missing")
                if isinstance(missing, int):
                    if missing_first is None:
                        missing_first = missing
                    elif missing < missing_first:
                        return  # some slice came back, maybe this one: try it
            now = time.monotonic()
            if now >= self._deadline:
                detail = f"waited {now - started:.0f} s; the dataset is {state!r}"
                if state == "ready":
                    detail += (" and the head still lists the node for them" if refusal
                               else " and the head still lists the node alive")
                if heal_error:
                    detail += f"; the head cannot repair it: {heal_error}"
                raise self._give_up(exc, nodes, detail)
            if now - last_log >= _LOG_EVERY_S:
                last_log = now
                log.warning("icefloe: waiting for dataset %r to be repaired: state %s, %s "
                            "slices missing%s; %.0f s of %.0f s waited", self.dataset, state,
                            desc.get("slices_missing", "?"),
                            f", {heal_error}" if heal_error else "", now - started,
                            self.timeout_s)
            step = max(polls, self._failures - 2) if retry_after_pause else polls
            delay = min(_POLL_S[min(step, len(_POLL_S) - 1)], self._deadline - now)
            polls += 1
            if stop is not None:
                if stop.wait(delay):
                    raise StreamBroken(f"{self.what} of dataset {self.dataset!r} stopped",
                                       nodes=nodes, dataset=self.dataset)
            else:
                time.sleep(delay)
            if retry_after_pause:
                return

    def _give_up(self, exc: BaseException, nodes: list[str], why: str) -> DataUnavailable:
        where = ", ".join(nodes) or "unknown"
        if is_refusal(exc):
            advice = ("No node answered with all of them: a node restarted with part of its "
                      "copy holds the rest only once the head has polled it and healed the "
                      "copy. Retry later, or reload the dataset (evict, then load)")
        else:
            advice = ("No live node holds a copy. Restart the node so the head can repair "
                      "the dataset, or reload it (evict, then load)")
        err = DataUnavailable(
            f"dataset {self.dataset!r}: rows held by node {where} cannot be read ({why}; "
            f"last error: {first_line(exc)}). {advice}; load it with replication >= 2 to "
            f"survive losing a node", nodes=nodes, dataset=self.dataset)
        err.__cause__ = exc
        return err


def retry_head(call: Callable[[], Any], *, timeout_s: float, what: str) -> Any:
    """``call`` (a head call), retried with backoff while the head is
    Unavailable (restarting), for at most ``timeout_s`` and 50 attempts."""
    deadline = time.monotonic() + timeout_s
    for attempt in range(50):
        try:
            return call()
        except Busy:
            raise
        except Unavailable as exc:
            if time.monotonic() >= deadline or attempt == 49:
                raise
            if attempt == 0:
                log.warning("icefloe: head unavailable for %s (%s); retrying for up to %.0f s",
                            what, first_line(exc), timeout_s)
            time.sleep(min(_POLL_S[min(attempt, len(_POLL_S) - 1)],
                           max(0.0, deadline - time.monotonic())))
    raise AssertionError("unreachable")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
