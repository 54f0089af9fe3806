"""``Client``: the Python client of an icefloe cluster.

The client asks the head where data lives, then reads it straight from the
data nodes, several endpoints in parallel. Every server error becomes a
specific :class:`icefloe.Error` subclass (see :mod:`icefloe.errors`).
"""

from __future__ import annotations

import base64
import json
import struct
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight

from . import _kubeflow, _malloc, _shared, _stall
from ._epoch_plan import EpochPlan
from ._failover import Recovery, ReplicaAttempts, ordered, retry_head
from ._fork import ForkedAfterFlightError, check_fork_safe, note_flight_use, track
from ._mixture import Mixture
from ._protocol import PROTOCOL_VERSION, decode, decode_reply, encode
from ._shared import is_local
from ._slice_map import SliceMaps, check_range, row_ids
from .errors import (
    Busy,
    Error,
    InvalidArgument,
    NotFound,
    ProtocolError,
    RowsNotHeld,
    StreamBroken,
    Unavailable,
    mapped_errors,
)

T = TypeVar("T")
_MAX_EXPORTS = 64  # nodes' shared files a client keeps for takes
_MAX_ROW_LENGTHS = 8  # (dataset, column, generation, budget) row lengths or codes kept
__all__ = ["Client", "ForkedAfterFlightError", "check_fork_safe", "mapped_errors"]

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
    # The head leaves out an absent snapshot (null is no value on the wire);
    # the description keeps its key.
    desc.setdefault("snapshot_id", None)
    if isinstance(desc.get("schema"), str) and desc["schema"]:
        desc["schema"] = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(desc["schema"])))
    return desc


def _renamed(where: str, old: str, old_value: Any, new: str, new_value: Any) -> Any:
    """``new_value``, or ``old_value`` given under a keyword's deprecated
    name (with a DeprecationWarning); InvalidArgument when both are given."""
    if old_value is None:
        return new_value
    if new_value is not None:
        raise InvalidArgument(f"{where}: give {new}= only ({old}= is its deprecated name)")
    warnings.warn(f"{where}({old}=...) is deprecated: pass {new}= ({old} names a consumer's "
                  "rows per batch everywhere else)", DeprecationWarning, stacklevel=3)
    return old_value


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
    ``grpc+tls://`` locations. ``read_parallelism`` bounds the threads that
    read the other nodes of one :meth:`read` or :meth:`take` while the caller
    reads the first. ``timeout_s`` bounds each call to the head;
    ``stream_timeout_s`` each DoGet stream from a node, whole (gRPC deadlines
    cover a call's whole life): an epoch whose stream reaches it goes on from
    a fresh one, as after a break, so an epoch may last any time.

    Reads fail over when a data node dies (docs/protocol.md, "Failover"):
    each episode of failures is bounded by ``failover_attempts`` attempts in
    a row and ``failover_timeout_s`` of waiting for the head to repair lost
    rows; calls to the head are retried while it is Unavailable for at most
    ``head_retry_s``.

    Epochs from a node on this host that shares its memory (``icefloe-node
    --share-memory``, as :class:`icefloe.LocalCluster` starts them) map its
    rows instead of streaming them, where this process may (same user and
    process namespace); ``share_memory=False`` streams them always.

    :meth:`take` asks nodes directly using a cached slice map per dataset,
    fetched again when a node calls it stale, after a break, after this
    client's own load or evict of the dataset, and at the latest
    ``slice_map_ttl_s`` after it was fetched (a reload by another client that
    leaves the old copy on the nodes is seen within that time).
    """

    def __init__(
        self,
        head_uri: str,
        token: str | None = None,
        tls_root_certs: str | bytes | Path | None = None,
        *,
        timeout_s: float = 60.0,
        read_parallelism: int = 4,
        failover_timeout_s: float = 120.0,
        failover_attempts: int = 10,
        head_retry_s: float = 30.0,
        stream_timeout_s: float = 600.0,
        slice_map_ttl_s: float = 10.0,
        share_memory: bool = True,
    ) -> None:
        if failover_timeout_s < 0 or failover_attempts < 1 or head_retry_s < 0 or \
                stream_timeout_s <= 0 or slice_map_ttl_s < 0:
            raise ValueError("failover_timeout_s, head_retry_s and slice_map_ttl_s must be "
                             ">= 0, failover_attempts >= 1, stream_timeout_s > 0")
        self.head_uri = head_uri
        self._timeout_s = timeout_s
        self.failover_timeout_s = failover_timeout_s
        self.failover_attempts = failover_attempts
        self.head_retry_s = head_retry_s
        self.stream_timeout_s = stream_timeout_s
        self.share_memory = share_memory
        self._unshared: set[str] = set()  # nodes whose shared files this process cannot map
        # Nodes' shared files by (node, storage name, generation), for takes.
        self._exports: OrderedDict[tuple[str, str, int], Any] = OrderedDict()
        self._parallelism = max(1, read_parallelism)
        self._headers = [(b"authorization", b"Bearer " + token.encode())] if token else []
        self._connect_kwargs: dict[str, Any] = {}
        roots = _pem(tls_root_certs)
        if roots:
            self._connect_kwargs["tls_root_certs"] = roots
        note_flight_use()
        _malloc.tune_for_streaming()
        with mapped_errors():
            self._head = flight.connect(head_uri, **self._connect_kwargs)
        track(self._head)
        self._nodes: dict[str, flight.FlightClient] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None  # reads several nodes at once (_all)
        self._head_reached = False
        self._slice_maps = SliceMaps(self.slice_map, ttl_s=slice_map_ttl_s)
        # Row lengths by (dataset, column, generation): a copy never changes.
        self._row_lengths: OrderedDict[tuple[str, str, int, int | None], Any] = OrderedDict()

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
                track(client)
            return client

    def _action_stream(
        self, kind: str, body: dict[str, Any] | None = None, timeout_s: float | None = None
    ) -> Iterator[Any]:
        payload = json.dumps(body or {"v": PROTOCOL_VERSION}).encode()
        with mapped_errors():
            for result in self._head.do_action(
                flight.Action(kind, payload), options=self.call_options(timeout_s)
            ):
                yield decode_reply(kind, result.body.to_pybytes())

    def _action(self, kind: str, body: dict[str, Any] | None = None) -> Any:
        """An action that reads (list, describe, status): retried while the
        head is Unavailable (restarting), for at most ``head_retry_s``."""
        results = self._retry_head(lambda: list(self._action_stream(kind, body)), kind)
        if not results:
            raise Unavailable(f"head returned no result for {kind}")
        return results[-1]

    def _head_info(self, descriptor: flight.FlightDescriptor) -> flight.FlightInfo:
        """GetFlightInfo on the head, retried while it is Unavailable."""
        def call() -> flight.FlightInfo:
            with mapped_errors():
                return self._head.get_flight_info(descriptor, options=self.call_options())
        return self._retry_head(call, "GetFlightInfo")

    def _retry_head(self, call: Callable[[], T], what: str) -> T:
        """``call`` retried while the head is Unavailable, once this client has
        reached it (a head that never answered is a wrong address: fail fast)."""
        result = retry_head(call, timeout_s=self.head_retry_s if self._head_reached else 0.0,
                            what=what)
        self._head_reached = True
        return result

    def _recovery(self, name: str, what: str) -> Recovery:
        return Recovery(self.describe, self.status, name, what,
                        timeout_s=self.failover_timeout_s, attempts=self.failover_attempts)

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
        batch_rows: int | None = None,
        replication: int = 1,
        transform: dict[str, Any] | None = None,
        progress: Callable[[dict[str, Any]], None] | None = None,
        timeout_s: float = 24 * 3600,
        batch_size: int | None = None,
    ) -> dict[str, Any]:
        """Loads an Iceberg table into the cache as dataset ``name``.

        ``source`` is a metadata.json location or a table directory. Blocks
        until the load ends, calling ``progress`` with each progress report,
        and returns the dataset's description. Loading the same table,
        snapshot, columns, filter and transform again returns the cached copy.

        ``transform`` (docs/transforms.md) makes the data nodes compute the
        cached columns once, at load: ``{"keep": [...], "columns": [{"name",
        "expr"} | {"name", "tokenize": {"column", "model", "bos", "eos",
        "max_tokens"}} | {"name", "chat": {"template", "messages", "model",
        "labels", "train_on", "max_tokens"}}], "pack": {"columns": ["input_ids",
        "labels"], "seq_len", "position_ids", "strategy": "concat" | "ffd",
        ...}}``. The head checks
        it against the table (and reads every tokenizer model) before anything
        loads; a bad spec raises InvalidArgument naming the column.

        ``batch_rows``: rows per cached record batch (the nodes' default when
        None). It is not a consumer's batch size (``iter_epoch``'s and
        ``CacheDataset``'s ``batch_size``), which any reader picks per epoch;
        ``batch_size`` here is its deprecated former name.
        """
        batch_rows = _renamed("Client.load", "batch_size", batch_size, "batch_rows", batch_rows)
        body = encode("load", name=name, source=str(source), snapshot_id=snapshot_id, ref=ref,
                      as_of_ms=_as_of_ms(as_of),
                      columns=list(columns) if columns is not None else None,
                      filter=filter or None, batch_rows=batch_rows, replication=replication,
                      transform=transform)
        last: dict[str, Any] = {}
        self._slice_maps.drop(name)
        for report in self._action_stream("load", body, timeout_s):
            last = report
            if report.get("state") == "loading" and progress is not None:
                progress(report)
        return _decode_schema(last)

    def refresh(
        self,
        name: str,
        *,
        progress: Callable[[dict[str, Any]], None] | None = None,
        timeout_s: float = 24 * 3600,
    ) -> dict[str, Any]:
        """Loads the newest snapshot of the table cached as ``name``, with the
        arguments it was loaded with (a pinned snapshot or time is dropped; a
        branch is followed). Only what changed is read: rows of unchanged
        data files are shared with the copy already cached, and the
        description's ``refresh`` says what was reused, read and dropped.
        Blocks like :meth:`load`; KeyError for an unknown name."""
        last: dict[str, Any] = {}
        self._slice_maps.drop(name)
        for report in self._action_stream("refresh", encode("refresh", name=name), timeout_s):
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

    def slice_map(self, name: str, columns: list[str] | None = None,
                  generation: int | None = None) -> dict[str, Any]:
        """Where a dataset's rows live, for random access in one hop: storage
        name, generation, rows, schema (base64 IPC; of ``columns`` only, when
        given), slices ``[{start, stop, nodes}]`` (live replicas first) and the
        read grant (base64; it names ``columns``, so nodes send only those).
        ``generation``: of that copy (a replaced one while the head keeps it,
        docs/protocol.md "Refresh"; InvalidArgument naming both generations
        once freed); default the current one."""
        return self._action("slice_map", encode(
            "slice_map", name=name, columns=list(columns) if columns is not None else None,
            generation=generation))

    def evict(self, name: str) -> dict[str, Any]:
        """Drops a dataset; its nodes free the memory."""
        self._slice_maps.drop(name)
        results = list(self._action_stream("evict", encode("evict", name=name)))
        if not results:
            raise Unavailable("head returned no result for evict")
        return results[-1]

    def status(self) -> dict[str, Any]:
        """Cluster status: nodes (state, memory), datasets and running loads."""
        return self._action("status")

    # -- reading ------------------------------------------------------------

    def flight_info(self, name: str, start: int = 0, stop: int | None = None,
                    columns: list[str] | None = None) -> flight.FlightInfo:
        """The endpoints covering global rows ``[start, stop)`` of a dataset;
        with ``columns``, tickets (and the schema) for only those columns, in
        that order (the nodes project: other columns never cross the wire)."""
        cmd = encode("range descriptor", dataset=name, start=start, stop=stop,
                     columns=columns)
        return self._head_info(flight.FlightDescriptor.for_command(json.dumps(cmd).encode()))

    def _failover(self, endpoint: flight.FlightEndpoint,
                  use: Callable[[flight.FlightStreamReader, str], T], dataset: str = "",
                  shared: bool = False, refused: set[str] | None = None) -> T:
        """``use(reader, location)`` applied to a DoGet of the endpoint's
        ticket on its first location that answers: replicas are tried in
        order while a node's connection fails or it does not hold all the
        rows (:class:`RowsNotHeld`; also in the middle of ``use``); when all
        fail, :class:`StreamBroken` names them; any other error, mapped and
        naming the dataset and node, is raised at once. With ``shared`` (a
        plan stream), a node on this host is asked for the stream by
        reference to its shared memory (icefloe._shared). ``refused``: the
        read's nodes that refused rows before, tried last (and added to)."""
        attempts = ReplicaAttempts(dataset, refused)
        uris = [location.uri.decode() for location in endpoint.locations]
        for uri in ordered(uris, attempts.refused):
            try:
                with mapped_errors():
                    reader = track(self._do_get(endpoint.ticket, uri, shared))
                    return use(reader, uri)
            except Error as exc:
                attempts.failed(exc, uri)
        raise attempts.exhausted()

    def read_endpoint(self, endpoint: flight.FlightEndpoint, dataset: str = "",
                      refused: set[str] | None = None) -> pa.Table:
        """Reads one endpoint, trying its replicas in order. A range ticket's
        rows are counted: a node that sends fewer (or more) rows than the
        ticket's range is a :class:`RowsNotHeld`, and the next replica is
        asked."""
        rows = _range_of(endpoint.ticket.ticket)

        def read_all(reader: Any, uri: str) -> pa.Table:
            if isinstance(reader, _shared.SharedReader):  # slices of the node's mapped file
                table = reader.read_range()
            else:
                table = reader.read_all()
            if rows is not None and table.num_rows != rows[1] - rows[0]:
                raise RowsNotHeld(f"node {uri} sent {table.num_rows} rows for the "
                                  f"{rows[1] - rows[0]} rows [{rows[0]}, {rows[1]}) it was "
                                  f"asked for; they are not all held by this node")
            return table

        # A range from a node on this host: by reference to its shared memory.
        return self._failover(endpoint, read_all, dataset, shared=rows is not None,
                              refused=refused)

    def read(self, name: str, start: int = 0, stop: int | None = None,
             columns: list[str] | None = None) -> pa.Table:
        """Global rows ``[start, stop)`` of dataset ``name``, in order; with
        ``columns``, only those columns, in that order (projected by the nodes).

        Every row exactly, or an error: a node that does not hold all the rows
        it is listed for (restarted with part of its copy) is failed over like
        an unreachable one, and the rows assembled are counted against the
        range asked for (:class:`icefloe.ProtocolError` if they differ)."""
        recovery = self._recovery(name, "read")
        while True:  # bounded by recovery
            info = self.flight_info(name, start, stop, columns)
            endpoints = list(info.endpoints)
            try:
                tables = self._all([lambda e=e: self.read_endpoint(e, name, recovery.refused)
                                    for e in endpoints])
            except StreamBroken as exc:  # nothing handed out yet: read it all again
                recovery.broken(exc, 0)
                continue
            table = pa.concat_tables(tables) if tables else info.schema.empty_table()
            # The head answers for exactly [start, stop) (total_records).
            if info.total_records >= 0 and table.num_rows != info.total_records:
                raise ProtocolError(
                    f"dataset {name!r}: reading rows [{start}, {stop if stop is not None else ''}"
                    f") assembled {table.num_rows} rows from {len(endpoints)} endpoint(s), but "
                    f"the head's reply covers {info.total_records}")
            return table

    def row_lengths(self, name: str, column: str, generation: int | None = None) -> np.ndarray:
        """Each row's length (its token count) in the ``list<int32>`` column
        ``column``, without reading the tokens: the nodes answer from the
        list offsets (lengths tickets, docs/protocol.md), 2 bytes a row
        (``uint16``) where every length fits, else ``uint32``. Kept per
        dataset, column and generation: asked again, no node is read.
        ``generation``: of that copy (as ``row_length_codes``); None: the
        current one. InvalidArgument for a column that is not
        ``list<int32>``, NotFound for one the dataset lacks."""
        return self._kept_lengths(name, column, None, generation)

    def row_length_codes(self, name: str, column: str, batch_tokens: int,
                         generation: int | None = None,
                         epoch_key: tuple[int, int, int] | None = None) -> Any:
        """The row lengths of ``column`` coded in a byte a row for plans of
        budget ``batch_tokens`` (``_length_codes.encode_lengths``; what
        token-budget epochs plan from). Kept per dataset, column, generation
        and budget in place of the lengths, which are not kept: half the
        memory of ``row_lengths``, and made once a host where the host's
        codes directory takes them (``_codes_file.host_codes``): the first
        consumer fetches and codes the lengths and publishes the codes in a
        file, which every other rank and DataLoader worker of the host maps
        without fetching the lengths. Errors as ``row_lengths``.
        ``generation``: of that copy (a replaced one while the head keeps
        it; InvalidArgument naming both generations once freed), as a
        token-budget epoch resumed on the copy it was planned from reads.
        ``epoch_key``: the ``(seed, epoch, world_size)`` of the epoch these
        codes plan; the head binds that epoch to the copy current at its
        first request and answers every rank's with that copy, so ranks
        asking on either side of a refresh plan from one generation
        (docs/protocol.md, Refresh). ``generation``, where given, wins."""
        return self._kept_lengths(name, column, int(batch_tokens), generation, epoch_key)

    def _kept_lengths(self, name: str, column: str, batch_tokens: int | None,
                      generation: int | None = None,
                      epoch_key: tuple[int, int, int] | None = None) -> Any:
        """``row_lengths`` (``batch_tokens`` None) or ``row_length_codes``,
        of the copy at ``generation`` (None: the one ``epoch_key``'s epoch
        is bound to, or without one the current one)."""
        recovery = self._recovery(name, "row lengths")
        seed, epoch, world_size = epoch_key if epoch_key is not None else (None, None, None)
        while True:  # bounded by recovery
            cmd = encode("range descriptor", dataset=name, lengths=column, generation=generation,
                         seed=seed, epoch=epoch, world_size=world_size)
            info = self._head_info(flight.FlightDescriptor.for_command(json.dumps(cmd).encode()))
            _check_lengths_schema(name, column, info.schema)  # before any node is read
            endpoints = list(info.endpoints)
            storage, generation = (_copy_of(endpoints[0].ticket.ticket) if endpoints
                                   else (name, 0))
            key = (name, column, generation, batch_tokens)
            with self._lock:
                if key in self._row_lengths:
                    self._row_lengths.move_to_end(key)
                    return self._row_lengths[key]
            try:
                if batch_tokens is None:
                    kept = self._fetch_lengths(name, column, info, endpoints, recovery)
                else:
                    kept = self._host_codes(name, column, batch_tokens, info, endpoints,
                                            recovery, storage, generation)
            except StreamBroken as exc:
                recovery.broken(exc, 0)
                continue
            with self._lock:
                self._row_lengths[key] = kept
                while len(self._row_lengths) > _MAX_ROW_LENGTHS:
                    self._row_lengths.popitem(last=False)
            return kept

    def _host_codes(self, name: str, column: str, batch_tokens: int, info: flight.FlightInfo,
                    endpoints: list[flight.FlightEndpoint], recovery: Recovery, storage: str,
                    generation: int) -> Any:
        """The codes from the host's codes file of this copy, column and
        budget, or fetched, coded and published there by this consumer."""
        from ._codes_file import CodesKey, host_codes
        from ._length_codes import encode_lengths

        def make() -> Any:
            lengths = self._fetch_lengths(name, column, info, endpoints, recovery)
            return encode_lengths(lengths, batch_tokens, generation=generation)

        # The head, storage name and generation name the copy's exact rows:
        # a copy loaded again (dropped or not) or refreshed has a generation
        # of its own, above every one before it (docs/epochs.md section 7).
        key = CodesKey(head=self.head_uri, dataset=storage, generation=generation,
                       column=column, rows=max(info.total_records, 0),
                       batch_tokens=batch_tokens)
        return host_codes(key, make) if info.total_records > 0 and endpoints else make()

    def _fetch_lengths(self, name: str, column: str, info: flight.FlightInfo,
                       endpoints: list[flight.FlightEndpoint], recovery: Recovery) -> np.ndarray:
        """Every row's length from the nodes (lengths tickets), checked
        against the head's count; StreamBroken where a stream broke."""
        tables = self._all([lambda e=e: self.read_endpoint(e, name, recovery.refused)
                            for e in endpoints])
        for t in tables:
            _check_lengths_schema(name, column, t.schema)
        parts = [c.to_numpy() for t in tables for c in t.column(0).chunks]
        wide = any(p.dtype != np.uint16 for p in parts)
        lengths = (np.concatenate([p.astype(np.uint32 if wide else np.uint16, copy=False)
                                   for p in parts]) if parts else np.empty(0, np.uint16))
        del parts, tables
        if info.total_records >= 0 and len(lengths) != info.total_records:
            raise ProtocolError(f"dataset {name!r}: {len(lengths)} row lengths of column "
                                f"{column!r} for {info.total_records} rows")
        return lengths

    # -- epochs and random access -------------------------------------------

    def epoch_info(self, name: str, plan: EpochPlan | None = None,
                   **fields: Any) -> tuple[flight.FlightInfo, dict[str, Any]]:
        """The endpoints of one consumer's epoch plan and its shape.

        ``plan`` (an :class:`icefloe.EpochPlan`) and ``fields`` (changes to
        it, or the whole plan) hold the plan coordinates: seed, epoch, shuffle ("window",
        the default, "none", "block", "sample"), block_rows, window_blocks,
        shuffle_within_block, world_size, rank, num_workers, worker,
        batch_size, drop_last, start, and to resume from a saved job
        resume_steps, resume_world_size, resume_batch_size (docs/epochs.md);
        ``columns`` projects the batches onto those columns, in that order.
        The shape (app_metadata) has the resolved start position.
        """
        cmd = (plan or EpochPlan()).replace(**fields).descriptor(name)
        info = self._head_info(flight.FlightDescriptor.for_command(json.dumps(cmd).encode()))
        return info, decode("epoch shape", info.app_metadata)

    def _endpoint_reader(self, endpoint: flight.FlightEndpoint, dataset: str,
                         refused: set[str] | None = None) -> Callable[[], Any]:
        """Opens the endpoint's stream on first use, failing over to replicas
        (those in ``refused`` last); returns (reader, the node's location)."""
        return lambda: self._failover(endpoint, lambda reader, uri: (reader, uri), dataset,
                                      shared=True, refused=refused)

    def _do_get(self, ticket: flight.Ticket, uri: str, shared: bool) -> Any:
        """A DoGet of ``ticket`` on node ``uri``; with ``shared``, by reference
        to the node's shared memory where it offers it and this process can
        map it (a :class:`icefloe._shared.SharedReader`), else as sent."""
        shared = shared and self.share_memory and uri not in self._unshared and is_local(uri)
        headers = self._headers + [_shared.HEADER] if shared else self._headers
        options = flight.FlightCallOptions(timeout=self.stream_timeout_s, headers=headers)
        reader = self.node(uri).do_get(ticket, options=options)
        if not shared:
            return reader
        try:
            return _shared.shared_reader(reader)
        except _shared.Unshareable:
            reader.cancel()
            self._unshared.add(uri)  # this node's files are not mappable from here
            return self._do_get(ticket, uri, shared=False)

    def kubeflow_shard(self, index: int, total: int) -> flight.FlightInfo:
        """The endpoints of Kubeflow shard ``index`` of ``total`` of the head's
        default dataset (PATH ``[index, total]``; docs/protocol.md)."""
        return self._head_info(flight.FlightDescriptor.for_path(str(index), str(total)))

    def iter_kubeflow_shard(self, index: int, total: int) -> Iterator[pa.RecordBatch]:
        """The record batches of Kubeflow shard ``index`` of ``total``, every
        row once, in global row order. A stream that breaks goes on from the
        row it reached on another replica (icefloe._kubeflow)."""
        def recovery() -> Recovery:
            return self._recovery(str(self.status().get("default_dataset") or ""), "shard")

        return _kubeflow.iter_shard(lambda: self.kubeflow_shard(index, total),
                                    lambda ticket, uri: self._do_get(ticket, uri, shared=False),
                                    recovery, index, total)

    def iter_epoch(self, name: str | Mapping[str, float] | Mixture, *,
                   batch_size: int | None = None, prefetch: int = 2,
                   as_numpy: bool = False,
                   transform: Callable[[pa.RecordBatch], Any] | None = None,
                   job: str | None = None,
                   on_shape: Callable[[dict[str, Any]], None] | None = None,
                   plan: EpochPlan | None = None,
                   report_as: EpochPlan | None = None,
                   **fields: Any) -> Iterator[Any]:
        """This consumer's batches of one epoch, in order.

        Reads every endpoint at once and assembles each batch from its pieces
        on a background thread, up to ``prefetch`` batches before they are
        asked for (a chunk of batches a node sent as one message counts as
        one; 0: on the caller's thread, when it has nothing else to do). An
        epoch whose streams all come by reference (shared memory) is read on
        the caller's thread whatever ``prefetch`` says: its batches are
        slices, cheaper to make than to hand between threads.
        Yields record batches, or with ``as_numpy`` dicts of numpy arrays
        (framework-neutral, for JAX or ``tf.data.Dataset.from_generator``), or
        what ``transform`` makes of each batch (the batch conversion, run on
        the same thread as the assembly; not the load's ``transform``, which
        the nodes ran when they loaded the copy). The epoch is ``plan`` (an
        :class:`icefloe.EpochPlan`) with ``batch_size`` and ``fields`` (its
        other fields: seed, epoch, shuffle, rank, world_size, ...; see
        :meth:`epoch_info`) changed. With ``columns`` the batches hold only
        those columns, in that order: the nodes project them, so the others never
        cross the wire, and a failover asks for the same columns. Where a node
        sent several whole batches as one message, a transform with a
        ``many(record_batch, sizes)`` attribute turns them at once
        (``icefloe.torch.batch_to_tensors`` has one), called as
        ``many(record_batch, sizes, offsets)`` where batch k is the
        ``sizes[k]`` rows at row ``offsets[k]`` rather than the batches
        following each other (a DDP rank's batches read from a node's shared
        memory); it must return what the transform would of each batch.

        Every consumer of one epoch of a job (same dataset, seed, epoch and
        world size) reads one generation of the dataset: the one current when
        the first of them asked. A refresh that lands mid-epoch takes effect
        at the next epoch; ``generation`` names the copy to
        read, as a resume does. ``on_shape`` is called once with the epoch's
        shape (its ``generation`` included).

        When a node dies mid-epoch the epoch continues from its first batch
        not yet complete, on another replica or once the head has repaired
        the rows (bounded: ``failover_timeout_s``, ``failover_attempts``):
        the batches are exactly those of an epoch without the fault.

        The time the caller waits for each batch is reported to the head in
        the background under ``job`` (default: ``$ICEFLOE_JOB``, else the
        Kubeflow TrainJob; see :mod:`icefloe._stall`), as the consumer the
        plan names (its rank and worker), or ``report_as``'s where given (a
        mixture reads a step that straddles a source's epochs as plans of
        one consumer, on behalf of the consumer whose step it is).

        ``name`` may be a mixture: ``{name: weight}`` (with the keywords
        ``mix_by``, ``token_column``, ``epoch_source``, ``epoch_total``,
        ``per_batch``, ``run_steps``) or an :class:`icefloe.Mixture`; each
        batch then holds every source's share of ``batch_size`` rows (or,
        ``per_batch``, one source's), and epoch ``epoch`` is the one that
        follows epochs 0 … epoch-1 read by the same world size
        (docs/epochs.md, "Mixtures"; ``on_shape`` is not called). With
        ``batch_tokens`` instead of ``batch_size`` each source is cut into
        token-budget batches, the weights counting tokens (docs/epochs.md,
        section 7, "Over a mixture").
        """
        from ._pieces import merged_batches

        if not isinstance(name, str):  # {name: weight} or a Mixture (icefloe._mixture)
            yield from _mixture_epoch(self, name, batch_size, prefetch, as_numpy, transform,
                                      job, plan, fields)
            return
        if as_numpy and transform is not None:
            raise ValueError("as_numpy and transform exclude each other")
        # The keyword's batch conversion; called `convert` from here on, so
        # that `transform` keeps to the load spec (ARCHITECTURE.md, glossary).
        convert = _to_numpy if as_numpy else transform
        if fields.get("batch_tokens") is not None:  # token-budget batches (_token_batches)
            from ._token_batches import iter_token_epoch
            consumer = (plan or EpochPlan()).replace(
                **{k: fields[k] for k in ("rank", "worker", "world_size", "columns")
                   if k in fields})
            meter = self._stall_meter(name, job, report_as or consumer)
            if meter is not None:
                convert = _counting(meter, convert)
            batches = iter_token_epoch(self, name, plan or EpochPlan(), convert=convert,
                                       prefetch=prefetch, on_shape=on_shape, **fields)
            yield from (batches if meter is None else _stall.metered(batches, meter))
            return
        if plan is None and batch_size is None:
            raise TypeError("iter_epoch() missing required keyword argument: 'batch_size'")
        plan = (plan or EpochPlan()).replace(**fields)
        if batch_size is not None:
            plan = plan.replace(batch_size=batch_size)
        info, shape = self.epoch_info(name, plan)
        # A failover reads on the copy the epoch started on, even after a
        # refresh replaced it (the head keeps it while it is read).
        plan = plan.replace(first_batch=None, generation=shape["generation"])
        if on_shape is not None:
            on_shape(shape)
        infos = {shape["first_batch"]: info}

        def open_streams(first: int) -> list[Callable[[], Any]]:
            """The epoch's endpoints from batch ``first`` on (a fresh FlightInfo
            after a break: the head names live replicas)."""
            fresh = infos.pop(first, None)
            if fresh is None:
                try:
                    fresh, again = self.epoch_info(name, plan, first_batch=first)
                except Unavailable as exc:  # the head cannot place the rows now
                    if isinstance(exc, Busy):
                        raise
                    raise StreamBroken(f"dataset {name!r}: {exc}", nodes=[],
                                       dataset=name) from exc
                _check_same_epoch(name, shape, again)
            return [self._endpoint_reader(e, name, recovery.refused) for e in fresh.endpoints]

        recovery = self._recovery(name, "epoch")
        meter = self._stall_meter(
            name, job, report_as or plan,
            lambda: [loc.uri.decode() for e in info.endpoints for loc in e.locations])
        if meter is not None:
            convert = _counting(meter, convert)
        batches = merged_batches(open_streams, shape["worker_batches"],
                                 first=shape["first_batch"], convert=convert,
                                 prefetch=max(0, prefetch), dataset=name,
                                 recover=recovery.broken)
        yield from (batches if meter is None else _stall.metered(batches, meter))

    def _stall_meter(self, name: str | list[str], job: str | None, plan: EpochPlan,
                     nodes_of: Callable[[], list[str]] | None = None
                     ) -> _stall.ConsumerMeter | None:
        """The stall meter of the consumer ``plan`` names, reading ``name``
        (a list: a mixture's sources, whose batches each hold rows of
        several: ``_stall.SourcesMeter``) from the nodes ``nodes_of()``
        names (default: those ``take`` reads ``name`` from); None when
        reports are off."""
        interval_s = _stall.report_interval_s()
        if interval_s <= 0:
            return None
        if nodes_of is None:
            names = [name] if isinstance(name, str) else name
            nodes = sorted({n for d in names for n in self._take_nodes(d, plan.columns)})
        else:
            nodes = nodes_of()
        submit = _stall.submitter(self.head_uri, self._headers, self._connect_kwargs)
        if not isinstance(name, str):
            return _stall.SourcesMeter(submit, job=_stall.job_name(job), datasets=name,
                                       rank=int(plan.rank or 0), worker=int(plan.worker or 0),
                                       world_size=int(plan.world_size or 1), nodes=nodes,
                                       interval_s=interval_s)
        return _stall.ConsumerMeter(submit, job=_stall.job_name(job), dataset=name,
                                    rank=int(plan.rank or 0), worker=int(plan.worker or 0),
                                    world_size=int(plan.world_size or 1), nodes=nodes,
                                    interval_s=interval_s)

    def _take_nodes(self, name: str, columns: Any = None) -> list[str]:
        """The nodes a take of ``name`` reads from (its slice map's replicas)."""
        smap = self._slice_maps.get(name, list(columns) if columns is not None else None)
        return sorted({n for nodes in smap.replica_sets for n in nodes})

    def take(self, name: str, rows: list[int] | Any,
             columns: list[str] | None = None, generation: int | None = None) -> pa.Table:
        """Rows by global id (any order, duplicates allowed), in that order.

        One hop: the client knows which nodes hold which rows (the slice map,
        fetched from the head once per dataset and generation) and asks each
        node holding any of them for its share with a ticket it builds under
        the head's read grant (docs/protocol.md, "Slice map"). A row outside
        the dataset is refused before any node is asked. With ``columns``, the
        nodes send only those columns, in that order (a slice map per column
        set, whose grant names them). With ``generation``, rows of that copy
        of the dataset: one a refresh replaced is read while the head keeps
        it for its readers (a token-budget epoch finishes so on the copy it
        was planned from); once freed, InvalidArgument naming both
        generations.
        """
        ids = row_ids(rows, name)
        recovery: Recovery | None = None
        retried_stale = False
        while True:  # bounded: one stale retry, and recovery
            smap = self._slice_maps.get(name, columns, generation)
            try:
                check_range(ids, smap)
            except InvalidArgument:
                if retried_stale:
                    raise
                # Maybe only outside an old copy: refuse on the head's current word.
                self._slice_maps.drop(name, smap)
                retried_stale = True
                continue
            if not len(ids):
                return smap.schema.empty_table()
            try:
                return self._take_groups(name, (smap.storage, smap.generation),
                                         smap.groups(ids), len(ids), columns)
            except StreamBroken as exc:  # nothing handed out yet: gather them all again
                self._slice_maps.drop(name, smap)
                recovery = recovery or self._recovery(name, "take")
                recovery.broken(exc, 0)
            except (InvalidArgument, NotFound) as exc:
                # The copy was replaced or evicted since the map was fetched:
                # fetch it again once; the head then says what is true now.
                if retried_stale or not _is_stale(exc):
                    raise
                self._slice_maps.drop(name, smap)
                retried_stale = True

    def _take_groups(self, name: str, key: tuple[str, int], groups: list[Any], total: int,
                     columns: list[str] | None = None) -> pa.Table:
        """The rows of kind-04 tickets, one per replica set, assembled in
        request order: each ticket read whole (failing over to its replicas),
        all at once (:meth:`_all`), then every node's pieces put in place with
        one take. Rows a node on this host shared before (the file of this
        generation that a take by reference mapped) are taken from that file,
        without asking the node. ``key``: the copy's (storage name,
        generation); ``total``: the rows of the answer."""
        from ._pieces import Rows, take_batch

        def read(reader: Any, uri: str) -> list[Any]:
            if isinstance(reader, _shared.SharedReader):  # its rows are copied by the merge
                self._keep_export(uri, key, reader.export)
            return list(reader)

        sources: list[list[Any]] = []
        remote: list[Callable[[], list[Any]]] = []
        for group in groups:
            export = self._export_for(group.nodes, key) if self.share_memory else None
            local = export.local_rows(group.rows) if export is not None else None
            if local is not None:  # in this process: no thread, no round trip
                sources.append([Rows(export.take(local, columns), total, group.positions)])
                continue
            endpoint = flight.FlightEndpoint(group.ticket, list(group.nodes))
            remote.append(lambda e=endpoint: self._failover(e, read, name, shared=True))
        sources += self._all(remote)
        return pa.Table.from_batches([take_batch(sources)])

    def _keep_export(self, uri: str, key: tuple[str, int], export: Any) -> None:
        """Keeps a node's shared file for takes of its copy's generation (the
        latest few; another generation of the same dataset replaces it)."""
        if (export.dataset, export.generation) != key or not export.held:
            return
        export.prefault()
        with self._lock:
            for k in [k for k in self._exports if k[0] == uri and k[1] == key[0]]:
                del self._exports[k]
            self._exports[(uri, *key)] = export
            while len(self._exports) > _MAX_EXPORTS:
                self._exports.popitem(last=False)

    def _export_for(self, nodes: tuple[str, ...], key: tuple[str, int]) -> Any:
        """A kept shared file of one of ``nodes`` for this copy, while that
        node still holds it (else it is forgotten: the node died, or dropped or
        replaced the copy, and its rows are asked for over the wire)."""
        with self._lock:
            for uri in nodes:
                export = self._exports.get((uri, *key))
                if export is None:
                    continue
                if export.alive():
                    return export
                del self._exports[(uri, *key)]
        return None

    def _all(self, calls: list[Callable[[], T]]) -> list[T]:
        """Every call's result, in order: the first on this thread, the others
        on the client's pool (``read_parallelism`` threads, made when first
        needed). pyarrow's ``do_get`` waits for the node's first message, so
        DoGets made one after another from one thread cost a round trip each
        before the next node starts (a 4096-row take from 2 nodes: 2.0 ms so,
        1.5 ms at once). Every call ends before the first error, in call order,
        is raised: no read is left running behind the caller."""
        if len(calls) <= 1:
            return [call() for call in calls]
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self._parallelism,
                                                thread_name_prefix="icefloe-read")
            pool = self._pool
        futures = [pool.submit(call) for call in calls[1:]]
        results: list[T] = []
        error: Exception | None = None
        for get in [calls[0], *(f.result for f in futures)]:
            try:
                results.append(get())
            except Exception as exc:  # noqa: BLE001 - raised once every call ended
                error = error or exc
        if error is not None:
            raise error
        return results

    def close(self) -> None:
        with self._lock:
            clients = [self._head, *self._nodes.values()]
            self._nodes.clear()
            self._exports.clear()  # unmapped once no batch refers to them
            pool, self._pool = self._pool, None
        _shared.FILES.clear()
        if pool is not None:
            pool.shutdown(wait=True)  # its reads end (bounded by their deadlines) first
        for client in clients:
            client.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _range_of(ticket: bytes) -> tuple[int, int] | None:
    """``[start, stop)`` of a native range ticket (docs/protocol.md, "Native
    tickets": magic, version 1, kind 01; the body is its last 16 bytes, before
    the 32-byte signature when flag bit 0 says signed); None for another."""
    if len(ticket) < 6 + 16 or ticket[:4] != b"\xffIF\x01" or ticket[4] != 0x01:
        return None
    end = len(ticket) - (32 if ticket[5] & 0x01 else 0)
    if end < 6 + 16:
        return None
    start, stop = struct.unpack_from("<QQ", ticket, end - 16)
    return (start, stop) if start <= stop else None


def _check_lengths_schema(name: str, column: str, schema: pa.Schema) -> None:
    """Refuses an answer to a lengths request that is not one unsigned
    column of that name: a head or node of a release before lengths tickets
    ignores the request's ``lengths`` and would answer with the rows."""
    if len(schema) != 1 or schema.names[0] != column or \
            schema.types[0] not in (pa.uint16(), pa.uint32()):
        raise ProtocolError(
            f"dataset {name!r}: the cluster answered a request for the row lengths of column "
            f"{column!r} with columns {schema.names} ({', '.join(map(str, schema.types))}); "
            "its head and nodes predate lengths tickets (docs/protocol.md): upgrade them")


def _copy_of(ticket: bytes) -> tuple[str, int]:
    """The storage name and generation of a native ticket (docs/protocol.md,
    "Native tickets": 6 fixed bytes, the name as u16 length and UTF-8, then
    u64 generation)."""
    (size,) = struct.unpack_from("<H", ticket, 6)
    (generation,) = struct.unpack_from("<Q", ticket, 8 + size)
    return bytes(ticket[8:8 + size]).decode("utf-8", "replace"), int(generation)


def _is_stale(err: Error) -> bool:
    """Whether a node's answer says the ticket's copy is gone: replaced by a
    newer generation, or not held (evicted, or the node restarted empty)."""
    text = str(err)
    return isinstance(err, NotFound) or "stale ticket" in text or "unknown dataset" in text


def _check_same_epoch(name: str, shape: dict[str, Any], again: dict[str, Any]) -> None:
    """Refuses to resume an epoch whose plan changed (the dataset was evicted
    and loaded again: a new copy of the same generation cannot be)."""
    keys = ("num_rows", "worker_batches", "start", "generation")
    if any(shape[k] != again[k] for k in keys):
        raise InvalidArgument(
            f"dataset {name!r} changed under this epoch (was {_pick(shape, keys)}, now "
            f"{_pick(again, keys)}): it was evicted and loaded again; restart the epoch")


def _pick(d: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: d.get(k) for k in keys}


def _counting(meter: _stall.ConsumerMeter,
              convert: Callable[[pa.RecordBatch], Any] | None) -> Callable[[pa.RecordBatch], Any]:
    """``convert`` that also tells ``meter`` each batch's rows (in order)."""
    from ._pieces import apply_many

    def count(batch: pa.RecordBatch) -> Any:
        meter.count_rows(batch.num_rows)
        return batch if convert is None else convert(batch)

    def count_many(batch: pa.RecordBatch, sizes: list[int],
                   offsets: list[int] | None = None) -> list[Any]:
        for n in sizes:
            meter.count_rows(n)
        return apply_many(convert, batch, sizes, offsets)

    count.many = count_many  # type: ignore[attr-defined]
    return count


def _mixture_epoch(client: Client, mixture: Any, batch_size: int | None, prefetch: int,
                   as_numpy: bool, transform: Callable[[pa.RecordBatch], Any] | None,
                   job: str | None, plan: EpochPlan | None,
                   fields: dict[str, Any]) -> Iterator[Any]:
    from ._mixture import iter_mixture
    from ._mixture_budget import iter_budget_mixture

    if as_numpy and transform is not None:
        raise ValueError("as_numpy and transform exclude each other")
    convert = _to_numpy if as_numpy else transform
    read = iter_budget_mixture if fields.get("batch_tokens") is not None else iter_mixture
    for batch in read(client, mixture, batch_size=batch_size, prefetch=prefetch,
                      job=job, plan=plan, **fields):
        yield batch if convert is None else convert(batch)


def _to_numpy(batch: pa.RecordBatch) -> dict[str, Any]:
    return {n: c.to_numpy(zero_copy_only=False)
            for n, c in zip(batch.schema.names, batch.columns, strict=True)}
