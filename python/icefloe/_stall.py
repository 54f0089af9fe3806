"""Data stall per consumer: how long the training loop waits for each batch.

A consumer (one ``iter_epoch``: a rank, or a DataLoader worker of one) times
every batch it hands to the loop: ``wait`` is from the loop asking for the
batch to getting it, ``elapsed`` from handing over the previous batch to
handing over this one (the loop's own work plus the wait). Every
``ICEFLOE_STALL_REPORT_S`` seconds (default 2; 0 turns reporting off) it
queues a ``job.report`` for the head (docs/protocol.md), which exports the
job's stall share and rows per second (docs/kubernetes.md).

Reporting never slows or breaks training: reports go to a bounded queue
(dropped when full) that one daemon thread per process sends with a short
deadline; while the head is unreachable the thread drops reports instead of
retrying them.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from pyarrow import flight

from ._protocol import PROTOCOL_VERSION

#: Reports waiting to be sent, per process; more are dropped.
MAX_QUEUED_REPORTS = 64
#: Deadline of one report call.
SEND_TIMEOUT_S = 2.0
#: After a failed send, reports are dropped (not sent) for this long.
BACKOFF_S = 10.0
#: A reporter thread with nothing to send for this long ends (a new one
#: starts with the next report), so a process that talked to many heads does
#: not keep a thread for each.
IDLE_EXIT_S = 30.0
_MAX_NODES = 64


def report_interval_s() -> float:
    """Seconds between a consumer's reports (``ICEFLOE_STALL_REPORT_S``)."""
    try:
        return max(0.0, float(os.environ.get("ICEFLOE_STALL_REPORT_S", "2")))
    except ValueError:
        return 2.0


def job_name(job: str | None = None) -> str:
    """The job a consumer reports under: ``job``, else ``$ICEFLOE_JOB``, else
    the Kubeflow TrainJob (``$TRAIN_JOB_NAME``), else ``"unnamed"``."""
    return (job or os.environ.get("ICEFLOE_JOB") or os.environ.get("TRAIN_JOB_NAME")
            or "unnamed")


class Reporter:
    """Sends queued reports to one head on a daemon thread (one per process
    and head; see :func:`reporter`)."""

    def __init__(self, head_uri: str, headers: list[tuple[bytes, bytes]],
                 connect_kwargs: dict[str, Any]) -> None:
        self._head_uri = head_uri
        self._headers = headers
        self._connect_kwargs = connect_kwargs
        self._queue: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=MAX_QUEUED_REPORTS)
        self._idle = threading.Condition()
        self._busy = 0  # reports taken off the queue and not yet settled
        self.sent = 0
        self.dropped = 0
        self.failed = 0
        self._down_until = 0.0
        self._thread = threading.Thread(target=self._run, name="icefloe-stall-reporter",
                                        daemon=True)
        self._thread.start()

    def submit(self, report: dict[str, Any]) -> None:
        """Queues a report; never blocks (a full queue drops it)."""
        try:
            self._queue.put_nowait(report)
        except queue.Full:
            self.dropped += 1

    def _idle_exit(self) -> bool:
        """Leaves the registry when nothing is queued (under its lock, so a
        report is either queued before or goes to a new reporter)."""
        with _reporters_lock:
            if not self._queue.empty():
                return False
            for key, r in list(_reporters.items()):
                if r is self:
                    del _reporters[key]
            return True

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Waits up to ``timeout_s`` until every queued report was sent or
        dropped (tests, and the end of a program that wants its last report)."""
        deadline = time.monotonic() + timeout_s
        with self._idle:
            while self._queue.unfinished_tasks:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(min(left, 0.1))
        return True

    def _run(self) -> None:
        client: flight.FlightClient | None = None
        while True:
            try:
                report = self._queue.get(timeout=IDLE_EXIT_S)
            except queue.Empty:
                if self._idle_exit():
                    if client is not None:
                        client.close()
                    return
                continue
            try:
                if time.monotonic() < self._down_until:
                    self.dropped += 1
                    continue
                try:
                    if client is None:
                        client = flight.connect(self._head_uri, **self._connect_kwargs)
                    options = flight.FlightCallOptions(timeout=SEND_TIMEOUT_S,
                                                       headers=self._headers)
                    body = json.dumps({"v": PROTOCOL_VERSION, **report}).encode()
                    for _ in client.do_action(flight.Action("job.report", body), options=options):
                        pass
                    self.sent += 1
                except Exception:  # noqa: BLE001 - any failure: drop, never raise
                    self.failed += 1
                    self._down_until = time.monotonic() + BACKOFF_S
                    if client is not None:
                        try:
                            client.close()
                        except Exception:  # noqa: BLE001
                            pass
                        client = None
            finally:
                self._queue.task_done()
                with self._idle:
                    self._idle.notify_all()


_reporters: dict[tuple[int, str], Reporter] = {}
_reporters_lock = threading.Lock()


def submitter(head_uri: str, headers: list[tuple[bytes, bytes]],
              connect_kwargs: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """A function that queues a report for ``head_uri`` with this process's
    reporter for it, starting one when there is none (none yet, it ended
    when idle, or this is a forked child: the parent's thread is not here)."""
    key = (os.getpid(), head_uri)

    def submit(report: dict[str, Any]) -> None:
        with _reporters_lock:
            r = _reporters.get(key)
            if r is None:
                r = _reporters[key] = Reporter(head_uri, headers, connect_kwargs)
            r.submit(report)

    return submit


def flush_all(timeout_s: float = 5.0) -> bool:
    """Flushes every reporter of this process."""
    with _reporters_lock:
        mine = [r for (pid, _), r in _reporters.items() if pid == os.getpid()]
    return all(r.flush(timeout_s) for r in mine)


class ConsumerMeter:
    """One consumer's stall measurement, submitted as reports every
    ``interval_s`` (and at the end of the epoch)."""

    def __init__(self, submit: Callable[[dict[str, Any]], None], *, job: str, dataset: str,
                 rank: int, worker: int, world_size: int, nodes: list[str],
                 interval_s: float) -> None:
        self._submit = submit
        self._base = {"job": job[:128], "dataset": dataset, "rank": rank, "worker": worker,
                      "world_size": max(world_size, rank + 1),
                      "nodes": sorted(set(nodes))[:_MAX_NODES]}
        self._interval_s = interval_s
        self._rows: collections.deque[int] = collections.deque()
        self._reset(time.perf_counter())

    def _reset(self, now: float) -> None:
        self._since = now
        self._batches = 0
        self._row_count = 0
        self._wait_s = 0.0
        self._elapsed_s = 0.0

    def count_rows(self, rows: int) -> None:
        """A batch of ``rows`` was assembled (any thread; in loop order)."""
        self._rows.append(rows)

    def batch(self, wait_s: float, elapsed_s: float, now: float) -> None:
        """The loop received a batch after waiting ``wait_s``."""
        self._batches += 1
        self._row_count += self._next_rows(wait_s)
        self._wait_s += wait_s
        self._elapsed_s += max(elapsed_s, wait_s)
        if now - self._since >= self._interval_s:
            self.report(now)

    def _next_rows(self, wait_s: float) -> int:
        """The rows of the batch the loop waited ``wait_s`` for."""
        del wait_s
        return self._rows.popleft() if self._rows else 0

    def end(self, wait_s: float, now: float) -> None:
        """The epoch ended (the loop waited ``wait_s`` to learn it)."""
        self._wait_s += wait_s
        self._elapsed_s += wait_s
        self.report(now)

    def report(self, now: float) -> None:
        elapsed_us = int(self._elapsed_s * 1e6)
        if self._batches or elapsed_us:
            self._submit({**self._base, "batches": self._batches, "rows": self._row_count,
                          "wait_us": min(int(self._wait_s * 1e6), max(elapsed_us, 1)),
                          "elapsed_us": max(elapsed_us, 1)})
        self._reset(now)


class SourcesMeter(ConsumerMeter):
    """A consumer whose batches hold rows of several datasets (a token-budget
    mixture's, read by takes): every ``interval_s`` one report per dataset,
    each covering the whole interval (the head takes a consumer's time as the
    union of its reports' intervals, docs/protocol.md ``job.report``), with
    that dataset's rows and the batches that held any, and the loop's wait
    for each batch split over the datasets in proportion to their rows in
    it, so that the reports' waits add up to the loop's once."""

    def __init__(self, submit: Callable[[dict[str, Any]], None], *, job: str,
                 datasets: list[str], rank: int, worker: int, world_size: int,
                 nodes: list[str], interval_s: float) -> None:
        self._datasets = list(datasets)
        super().__init__(submit, job=job, dataset=self._datasets[0], rank=rank, worker=worker,
                         world_size=world_size, nodes=nodes, interval_s=interval_s)

    def _reset(self, now: float) -> None:
        super()._reset(now)
        n = len(self._datasets)
        self._source_rows = [0] * n
        self._source_batches = [0] * n
        self._source_wait_s = [0.0] * n

    def count_rows(self, rows: Any) -> None:
        """A batch was assembled with ``rows[i]`` rows of dataset i (any
        thread; in loop order)."""
        self._rows.append(rows)

    def _next_rows(self, wait_s: float) -> int:
        parts = self._rows.popleft() if self._rows else [0] * len(self._datasets)
        total = sum(parts)
        for i, n in enumerate(parts):
            self._source_rows[i] += n
            self._source_batches[i] += n > 0
            # A batch of no row: its wait is the first dataset's.
            self._source_wait_s[i] += wait_s * (n / total if total else float(i == 0))
        return total

    def end(self, wait_s: float, now: float) -> None:
        self._source_wait_s[0] += wait_s
        super().end(wait_s, now)

    def report(self, now: float) -> None:
        elapsed_us = int(self._elapsed_s * 1e6)
        if self._batches or elapsed_us:
            for i, dataset in enumerate(self._datasets):
                self._submit({**self._base, "dataset": dataset,
                              "batches": self._source_batches[i],
                              "rows": self._source_rows[i],
                              "wait_us": min(int(self._source_wait_s[i] * 1e6),
                                             max(elapsed_us, 1)),
                              "elapsed_us": max(elapsed_us, 1)})
        self._reset(now)


def metered(items: Iterator[Any], meter: ConsumerMeter) -> Iterator[Any]:
    """Yields ``items``, timing how long the caller waits for each; closing
    it (the loop stopped early) reports what was read and closes ``items``."""
    handed = None  # when the previous batch was handed over
    try:
        while True:
            asked = time.perf_counter()
            try:
                item = next(items)
            except StopIteration:
                now = time.perf_counter()
                meter.end(now - asked, now)
                return
            got = time.perf_counter()
            meter.batch(got - asked, got - (handed if handed is not None else asked), got)
            handed = got
            yield item
    except GeneratorExit:
        meter.report(time.perf_counter())
        raise
    finally:
        close = getattr(items, "close", None)
        if close is not None:
            close()
