"""``Client``: the Python client of an icefloe cluster.

The client asks the head where data lives, then reads it straight from the
data nodes, several endpoints in parallel. Every server error becomes a
specific :class:`icefloe.Error` subclass (see :mod:`icefloe.errors`).
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from . import _malloc, _stall
from ._protocol import PROTOCOL_VERSION, encode
from .errors import Error, InvalidArgument, Unavailable, map_error

T = TypeVar("T")

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


def _note_flight_use() -> None:
    global _flight_pid
    check_fork_safe()
    _flight_pid = os.getpid()


@contextmanager
def mapped_errors() -> Iterator[None]:
    """Re-raises pyarrow/Flight errors as icefloe errors."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - re-raised as a specific icefloe error
        mapped = map_error(exc)
        if mapped is exc:
            raise
        raise mapped from exc


def _pem(value: str | bytes | Path | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value
    text = str(value)
    if "-----BEGIN" in text:
        return text.encode()
    return Path(text).read_bytes()


def _decode_schema(desc: dict[str, Any]) -> dict[str, Any]:
    if isinstance(desc.get("schema"), str) and desc["schema"]:
        desc["schema"] = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(desc["schema"])))
    return desc


def _as_of_ms(as_of: datetime | int | str | None) -> Any:
    """Milliseconds since the epoch; numbers pass as they are (the encoder
    refuses a fractional one rather than rounding it)."""
    if isinstance(as_of, datetime):
        return int(as_of.timestamp() * 1000)
    if isinstance(as_of, str):
        return int(datetime.fromisoformat(as_of).timestamp() * 1000)
    return as_of


class Client:
    """Talks to a head; reads data straight from the data nodes.

    ``token`` is the cluster token (sent as ``authorization: Bearer``);
    ``tls_root_certs`` is a PEM (text, bytes or a path) to trust for
    ``grpc+tls://`` locations. ``read_parallelism`` bounds concurrent endpoint
    reads in :meth:`read`.
    """

    def __init__(
        self,
        head_uri: str,
        token: str | None = None,
        tls_root_certs: str | bytes | Path | None = None,
        *,
        timeout_s: float = 60.0,
        read_parallelism: int = 4,
    ) -> None:
        self.head_uri = head_uri
        self._timeout_s = timeout_s
        self._parallelism = max(1, read_parallelism)
        self._headers = [(b"authorization", b"Bearer " + token.encode())] if token else []
        self._connect_kwargs: dict[str, Any] = {}
        roots = _pem(tls_root_certs)
        if roots:
            self._connect_kwargs["tls_root_certs"] = roots
        _note_flight_use()
        _malloc.tune_for_streaming()
        with mapped_errors():
            self._head = flight.connect(head_uri, **self._connect_kwargs)
        self._nodes: dict[str, flight.FlightClient] = {}
        self._lock = threading.Lock()

    # -- plumbing ---------------------------------------------------------

    def call_options(self, timeout_s: float | None = None) -> flight.FlightCallOptions:
        return flight.FlightCallOptions(
            timeout=timeout_s or self._timeout_s, headers=self._headers
        )

    def node(self, location: str) -> flight.FlightClient:
        """A (cached) Flight client of a data node."""
        with self._lock:
            client = self._nodes.get(location)
            if client is None:
                client = self._nodes[location] = flight.connect(location, **self._connect_kwargs)
            return client

    def _action_stream(
        self, kind: str, body: dict[str, Any] | None = None, timeout_s: float | None = None
    ) -> Iterator[Any]:
        payload = json.dumps(body or {"v": PROTOCOL_VERSION}).encode()
        with mapped_errors():
            for result in self._head.do_action(
                flight.Action(kind, payload), options=self.call_options(timeout_s)
            ):
                yield json.loads(result.body.to_pybytes())

    def _action(self, kind: str, body: dict[str, Any] | None = None) -> Any:
        results = list(self._action_stream(kind, body))
        if not results:
            raise Unavailable(f"head returned no result for {kind}")
        return results[-1]

    # -- catalog ------------------------------------------------------------

    def load(
        self,
        name: str,
        source: str,
        *,
        snapshot_id: int | None = None,
        ref: str | None = None,
        as_of: datetime | int | str | None = None,
        columns: list[str] | None = None,
        filter: str | None = None,  # noqa: A002 - the documented name
        batch_size: int | None = None,
        replication: int = 1,
        progress: Callable[[dict[str, Any]], None] | None = None,
        timeout_s: float = 24 * 3600,
    ) -> dict[str, Any]:
        """Loads an Iceberg table into the cache as dataset ``name``.

        ``source`` is a metadata.json location or a table directory. Blocks
        until the load ends, calling ``progress`` with each progress report,
        and returns the dataset's description. Loading the same table,
        snapshot, columns and filter again returns the cached copy.
        """
        body = encode("load", name=name, source=str(source), snapshot_id=snapshot_id, ref=ref,
                      as_of_ms=_as_of_ms(as_of),
                      columns=list(columns) if columns is not None else None,
                      filter=filter or None, batch_rows=batch_size, replication=replication)
        last: dict[str, Any] = {}
        for report in self._action_stream("load", body, timeout_s):
            last = report
            if report.get("state") == "loading" and progress is not None:
                progress(report)
        return _decode_schema(last)

    def datasets(self) -> list[dict[str, Any]]:
        """Every dataset the head knows (name, state, rows, bytes, schema, ...)."""
        return [_decode_schema(d) for d in self._action("list")]

    def describe(self, name: str) -> dict[str, Any]:
        """One dataset, with its slice map (which nodes hold which rows)."""
        return _decode_schema(self._action("describe", encode("describe", name=name)))

    def evict(self, name: str) -> dict[str, Any]:
        """Drops a dataset; its nodes free the memory."""
        return self._action("evict", encode("evict", name=name))

    def status(self) -> dict[str, Any]:
        """Cluster status: nodes (state, memory), datasets and running loads."""
        return self._action("status")

    # -- reading ------------------------------------------------------------

    def flight_info(self, name: str, start: int = 0, stop: int | None = None) -> flight.FlightInfo:
        """The endpoints covering global rows ``[start, stop)`` of a dataset."""
        cmd = encode("range descriptor", dataset=name, start=start, stop=stop)
        descriptor = flight.FlightDescriptor.for_command(json.dumps(cmd).encode())
        with mapped_errors():
            return self._head.get_flight_info(descriptor, options=self.call_options())

    def _failover(self, endpoint: flight.FlightEndpoint,
                  use: Callable[[flight.FlightStreamReader], T]) -> T:
        """``use`` applied to a DoGet of the endpoint's ticket on its first
        location that answers: replicas are tried in order while a node is
        Unavailable; any other error, mapped, is raised at once."""
        last_error: BaseException | None = None
        for location in endpoint.locations:
            try:
                with mapped_errors():
                    reader = self.node(location.uri.decode()).do_get(
                        endpoint.ticket, options=self.call_options())
                    return use(reader)
            except Unavailable as exc:
                last_error = exc
        if last_error is None:
            raise InvalidArgument("the head returned an endpoint without locations")
        raise last_error

    def read_endpoint(self, endpoint: flight.FlightEndpoint) -> pa.Table:
        """Reads one endpoint, trying its replicas in order."""
        return self._failover(endpoint, lambda reader: reader.read_all())

    def iter_endpoint(self, endpoint: flight.FlightEndpoint) -> Iterator[pa.RecordBatch]:
        """Streams one endpoint's record batches. Replicas are tried in order
        until one sends its first message; errors after that are raised
        (mapped), since rows already handed out cannot be taken back."""
        reader, first = self._failover(endpoint, _read_first)
        if first is None:
            return
        yield first
        with mapped_errors():
            for chunk in reader:
                yield chunk.data

    def read(self, name: str, start: int = 0, stop: int | None = None) -> pa.Table:
        """Global rows ``[start, stop)`` of dataset ``name``, in order."""
        info = self.flight_info(name, start, stop)
        endpoints = list(info.endpoints)
        if not endpoints:
            return info.schema.empty_table()
        with ThreadPoolExecutor(max_workers=min(self._parallelism, len(endpoints))) as pool:
            tables = list(pool.map(self.read_endpoint, endpoints))
        return pa.concat_tables(tables)

    # -- epochs and random access -------------------------------------------

    def epoch_info(self, name: str, **plan: Any) -> tuple[flight.FlightInfo, dict[str, Any]]:
        """The endpoints of one consumer's epoch plan and its shape.

        ``plan`` holds the plan coordinates: seed, epoch, shuffle ("window",
        the default, "none", "block", "sample"), block_rows, window_blocks,
        shuffle_within_block, world_size, rank, num_workers, worker,
        batch_size, drop_last, start, and to resume from a saved job
        resume_steps, resume_world_size, resume_batch_size (docs/epochs.md).
        The shape (app_metadata) has the resolved start position.
        """
        cmd = encode("epoch descriptor", dataset=name, **plan)
        descriptor = flight.FlightDescriptor.for_command(json.dumps(cmd).encode())
        with mapped_errors():
            info = self._head.get_flight_info(descriptor, options=self.call_options())
        return info, json.loads(info.app_metadata or b"{}")

    def _endpoint_reader(self, endpoint: flight.FlightEndpoint) -> Callable[[], Any]:
        """Opens the endpoint's stream on first use, failing over to replicas."""
        return lambda: self._failover(endpoint, lambda reader: reader)

    def kubeflow_shard(self, index: int, total: int) -> flight.FlightInfo:
        """The endpoints of Kubeflow shard ``index`` of ``total`` of the head's
        default dataset (PATH ``[index, total]``; docs/protocol.md)."""
        descriptor = flight.FlightDescriptor.for_path(str(index), str(total))
        with mapped_errors():
            return self._head.get_flight_info(descriptor, options=self.call_options())

    def iter_epoch(self, name: str, *, batch_size: int, prefetch: int = 2,
                   as_numpy: bool = False,
                   transform: Callable[[pa.RecordBatch], Any] | None = None,
                   job: str | None = None,
                   **plan: Any) -> Iterator[Any]:
        """This consumer's batches of one epoch, in order.

        Reads every endpoint at once and assembles each batch from its pieces
        on a background thread, up to ``prefetch`` batches before they are
        asked for (0: on the caller's thread, when it has nothing else to do).
        Yields record batches, or with ``as_numpy`` dicts of numpy arrays
        (framework-neutral, for JAX or ``tf.data.Dataset.from_generator``), or
        what ``transform`` makes of each batch (run on the same thread as the
        assembly).

        The time the caller waits for each batch is reported to the head in
        the background under ``job`` (default: ``$ICEFLOE_JOB``, else the
        Kubeflow TrainJob; see :mod:`icefloe._stall`).
        """
        from ._pieces import merged_batches

        if as_numpy and transform is not None:
            raise ValueError("as_numpy and transform exclude each other")
        if as_numpy:
            transform = _to_numpy
        info, shape = self.epoch_info(name, batch_size=batch_size, **plan)
        readers = [self._endpoint_reader(e) for e in info.endpoints]
        meter = self._stall_meter(name, job, plan, info)
        if meter is not None:
            transform = _counting(meter, transform)
        batches = merged_batches(readers, int(shape["worker_batches"]),
                                 first=int(shape.get("first_batch", 0)), transform=transform,
                                 prefetch=max(0, prefetch))
        yield from (batches if meter is None else _stall.metered(batches, meter))

    def _stall_meter(self, name: str, job: str | None, plan: dict[str, Any],
                     info: flight.FlightInfo) -> _stall.ConsumerMeter | None:
        interval_s = _stall.report_interval_s()
        if interval_s <= 0:
            return None
        submit = _stall.submitter(self.head_uri, self._headers, self._connect_kwargs)
        nodes = [loc.uri.decode() for e in info.endpoints for loc in e.locations]
        return _stall.ConsumerMeter(submit, job=_stall.job_name(job), dataset=name,
                                    rank=int(plan.get("rank", 0)),
                                    worker=int(plan.get("worker", 0)),
                                    world_size=int(plan.get("world_size", 1)), nodes=nodes,
                                    interval_s=interval_s)

    def take(self, name: str, rows: list[int] | Any) -> pa.Table:
        """Rows by global id (any order, duplicates allowed), in that order.

        One gather per node holding any of them, done by the nodes.
        """
        from ._pieces import merged_batches

        if hasattr(rows, "tolist"):  # numpy arrays, torch tensors: their Python values
            rows = rows.tolist()
        ids = rows if isinstance(rows, (list, tuple)) else list(rows)
        cmd = encode("rows descriptor", dataset=name, rows=ids)  # integers, never rounded
        if not ids:
            return self.flight_info(name, 0, 0).schema.empty_table()
        descriptor = flight.FlightDescriptor.for_command(json.dumps(cmd).encode())
        with mapped_errors():
            info = self._head.get_flight_info(descriptor, options=self.call_options())
        readers = [self._endpoint_reader(e) for e in info.endpoints]
        return pa.Table.from_batches(list(merged_batches(readers, 1)))

    def close(self) -> None:
        with self._lock:
            clients = [self._head, *self._nodes.values()]
            self._nodes.clear()
        for client in clients:
            client.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_first(reader: flight.FlightStreamReader) -> tuple[Any, pa.RecordBatch | None]:
    """The reader and its first record batch (None for an empty stream)."""
    try:
        return reader, reader.read_chunk().data
    except StopIteration:
        return reader, None


def _counting(meter: _stall.ConsumerMeter,
              transform: Callable[[pa.RecordBatch], Any] | None) -> Callable[[pa.RecordBatch], Any]:
    """``transform`` that also tells ``meter`` each batch's rows (in order)."""
    def count(batch: pa.RecordBatch) -> Any:
        meter.count_rows(batch.num_rows)
        return batch if transform is None else transform(batch)

    return count


def _to_numpy(batch: pa.RecordBatch) -> dict[str, Any]:
    return {n: c.to_numpy(zero_copy_only=False)
            for n, c in zip(batch.schema.names, batch.columns, strict=True)}
