"""The reader's failover decisions (python/icefloe/_failover.py) against an
in-process fake of the head's answers: when to retry at once, when to wait,
when to give up, and what the error says. The real thing, with SIGKILLed
nodes, is tests/test_faults.py and tests/test_chaos.py."""

from __future__ import annotations

import pytest

import icefloe
from icefloe._failover import Recovery, is_break, retry_head
from icefloe.errors import StreamBroken

NODE = "grpc://127.0.0.1:9"


class FakeHead:
    """Answers describe/status from a script of (state, node alive, heal_error)."""

    def __init__(self, script: list[tuple[str, bool, str | None]]) -> None:
        self.script = script
        self.missing = [1]  # slices_missing, poll by poll
        self.polls = 0

    def _now(self) -> tuple[str, bool, str | None]:
        return self.script[min(self.polls, len(self.script) - 1)]

    def describe(self, name: str) -> dict:
        state, _, heal_error = self._now()
        desc = {"name": name, "state": state,
                "slices_missing": self.missing[min(self.polls, len(self.missing) - 1)]}
        if heal_error:
            desc["heal_error"] = heal_error
        return desc

    def status(self) -> dict:
        _, alive, _ = self._now()
        self.polls += 1
        return {"nodes": [{"location": NODE, "state": "alive" if alive else "dead"}]}


def _recovery(head: FakeHead, timeout_s: float = 5.0, attempts: int = 10) -> Recovery:
    return Recovery(head.describe, head.status, "t", "epoch", timeout_s=timeout_s,
                    attempts=attempts)


def _break() -> StreamBroken:
    return StreamBroken("Stream removed", nodes=[NODE], dataset="t")


def test_breaks_and_answers():
    assert is_break(icefloe.Unavailable("Stream removed (Socket closed)"))
    assert is_break(icefloe.Timeout("Stream removed (Deadline Exceeded)"))
    assert is_break(icefloe.ServerError("Received RST_STREAM with error code 2"))
    assert not is_break(icefloe.Busy("load queue full"))
    assert not is_break(icefloe.InvalidArgument("stale ticket"))
    assert not is_break(icefloe.OutOfMemory("Out of memory"))
    assert not is_break(icefloe.Cancelled("cancelled by the client"))


def test_first_break_retries_at_once_then_waits_while_degraded():
    head = FakeHead([("degraded", False, None), ("healing", False, None),
                     ("ready", False, None)])
    rec = _recovery(head)
    rec.broken(_break(), 3)
    assert head.polls == 0  # at once: another replica may serve it
    rec.broken(_break(), 3)  # every replica failed: wait for the head
    assert head.polls == 3  # returned once ready, the dead node no longer listed


def test_retries_when_a_slice_comes_back_while_others_stay_missing():
    head = FakeHead([("degraded", False, None)])
    head.missing = [3, 3, 2]
    rec = _recovery(head)
    rec.broken(_break(), 0)
    rec.broken(_break(), 0)
    assert head.polls == 3  # returned when slices_missing fell from 3 to 2


def test_progress_starts_a_new_episode():
    head = FakeHead([("ready", False, None)])
    rec = _recovery(head, attempts=2)
    for batch in range(5):  # one break per batch, each followed by progress
        rec.broken(_break(), batch)
    assert head.polls == 0


def test_waits_while_the_head_has_not_noticed_the_node_died():
    head = FakeHead([("ready", True, None), ("ready", True, None), ("ready", False, None)])
    rec = _recovery(head)
    rec.broken(_break(), 0)
    rec.broken(_break(), 0)
    assert head.polls == 3


def test_gives_up_when_only_dead_nodes_hold_the_rows():
    head = FakeHead([("ready", False, None)])
    rec = _recovery(head)
    rec.broken(_break(), 7)
    rec.broken(_break(), 7)  # one more try: the head may have re-placed the rows
    with pytest.raises(icefloe.DataUnavailable) as err:
        rec.broken(_break(), 7)
    msg = str(err.value)
    assert NODE in msg and "'t'" in msg and "not healing" in msg and "reload" in msg
    assert err.value.nodes == [NODE] and err.value.dataset == "t"


def test_gives_up_after_the_wait_with_the_heads_reason():
    head = FakeHead([("degraded", False, "no node has room: needs 1000 bytes")])
    rec = _recovery(head, timeout_s=0.5)
    rec.broken(_break(), 0)
    with pytest.raises(icefloe.DataUnavailable, match="no node has room: needs 1000 bytes"):
        rec.broken(_break(), 0)


def test_failed_dataset_and_attempts_end_it():
    rec = _recovery(FakeHead([("failed", False, None)]))
    rec.broken(_break(), 0)
    with pytest.raises(icefloe.DataUnavailable, match="'failed'"):
        rec.broken(_break(), 0)
    rec = _recovery(FakeHead([("ready", True, None)]), attempts=1)
    rec.broken(_break(), 0)
    with pytest.raises(icefloe.DataUnavailable, match="1 failovers in a row"):
        rec.broken(_break(), 0)


def test_head_calls_retry_while_unavailable_bounded():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise icefloe.Unavailable("connection refused")
        return "answer"

    assert retry_head(flaky, timeout_s=10.0, what="describe") == "answer"
    assert len(calls) == 3

    def down():
        calls.append(1)
        raise icefloe.Unavailable("connection refused")

    calls.clear()
    with pytest.raises(icefloe.Unavailable):
        retry_head(down, timeout_s=0.0, what="describe")
    assert len(calls) == 1

    def busy():
        calls.append(1)
        raise icefloe.Busy("load queue full")

    calls.clear()
    with pytest.raises(icefloe.Busy):
        retry_head(busy, timeout_s=10.0, what="describe")
    assert len(calls) == 1


def test_a_resumed_epoch_must_be_the_same_copy():
    from icefloe.client import _check_same_epoch

    shape = {"num_rows": 100, "worker_batches": 4, "start": 0, "generation": 7}
    _check_same_epoch("t", shape, dict(shape, first_batch=2))  # the same epoch, later on
    with pytest.raises(icefloe.InvalidArgument, match="changed under this epoch"):
        _check_same_epoch("t", shape, dict(shape, generation=8))  # evicted and loaded again
