"""Kubeflow shards on the client side (docs/protocol.md, "Kubeflow shards"):
the ticket codec and a shard read that fails over like an epoch.

The head answers a PATH ``[index, total]`` descriptor with one endpoint per
slice of the shard, in row order: its ticket holds that slice's part of the
shard as inclusive global row ids, its locations every replica, live first.
Kubeflow's own client reads ``locations[0]`` of each endpoint and gets exactly
its shard. Here a stream that breaks (or ends short of its range) goes on at
the first row not yet handed out, on the endpoint's next replica, with a
ticket for the rest of the range; when no replica answers, the head is asked
again for the shard, bounded by the client's ``failover_timeout_s`` and
``failover_attempts``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from ._failover import Recovery, ReplicaAttempts, first_line, log
from ._fork import track
from .errors import Error, StreamBroken, mapped_errors

# What a shard read needs of a client, as callables (this module knows no
# Client: the client imports it): the shard's FlightInfo, a plain DoGet of
# a ticket on a node, and the failover budget of a broken read.
ShardInfo = Callable[[], flight.FlightInfo]
DoGet = Callable[[flight.Ticket, str], Any]
NewRecovery = Callable[[], Recovery]

_VARINT = ((0xFFFF, b"\xfb", 2), (0xFFFFFFFF, b"\xfc", 4), (0xFFFFFFFFFFFFFFFF, b"\xfd", 8))


def encode_ticket(start: int, end: int) -> bytes:
    """Kubeflow's ticket for the inclusive global rows ``[start, end]``."""
    out = b""
    for v in (start, end):
        if v <= 250:
            out += bytes([v])
            continue
        for most, tag, size in _VARINT:
            if v <= most:
                out += tag + v.to_bytes(size, "little")
                break
    return out


def decode_ticket(data: bytes) -> tuple[int, int]:
    """The inclusive bounds ``(start, end)`` of a Kubeflow ticket; ValueError
    when it does not decode (trailing bytes are ignored, as on the nodes)."""
    values: list[int] = []
    at = 0
    while len(values) < 2:
        if at >= len(data):
            raise ValueError(f"Invalid ticket format: {data!r}")
        tag = data[at]
        size = {0xFB: 2, 0xFC: 4, 0xFD: 8}.get(tag, 0)
        if (size == 0 and tag > 250) or at + 1 + size > len(data):
            raise ValueError(f"Invalid ticket format: {data!r}")
        values.append(tag if size == 0 else int.from_bytes(data[at + 1:at + 1 + size], "little"))
        at += 1 + size
    return values[0], values[1]


def iter_shard(shard_info: ShardInfo, do_get: DoGet, new_recovery: NewRecovery, index: int,
               total: int) -> Iterator[pa.RecordBatch]:
    """The record batches of Kubeflow shard ``index`` of ``total`` of the
    head's default dataset (``shard_info`` asks the head for it), every row
    once, in global row order."""
    next_row: int | None = None  # the first global row not handed out yet
    recovery: Recovery | None = None
    while True:  # bounded by recovery
        info = shard_info()
        try:
            for endpoint in info.endpoints:
                first, last = decode_ticket(endpoint.ticket.ticket)
                if next_row is None:
                    next_row = first
                if last < next_row:
                    continue  # handed out before a failover
                if first > next_row:
                    raise StreamBroken(f"the head listed no node for rows {next_row}..{first - 1} "
                                       f"of shard {index} of {total}", nodes=[])
                for batch in _read_part(do_get, endpoint, next_row, last):
                    next_row += batch.num_rows
                    yield batch
            return
        except StreamBroken as exc:
            if recovery is None:
                recovery = new_recovery()
            recovery.broken(exc, next_row or 0)


def _read_part(do_get: DoGet, endpoint: flight.FlightEndpoint, start: int,
               last: int) -> Iterator[pa.RecordBatch]:
    """Rows ``[start, last]`` of one endpoint from its replicas in order; a
    stream that breaks or ends short goes on at the next row on the next one.
    StreamBroken naming the nodes tried when none has the rest."""
    attempts = ReplicaAttempts()
    for location in endpoint.locations:
        uri = location.uri.decode()
        ticket = flight.Ticket(encode_ticket(start, last))
        try:
            with mapped_errors():
                for chunk in track(do_get(ticket, uri)):
                    yield chunk.data
                    start += chunk.data.num_rows
            if start > last:
                return
            raise StreamBroken(f"node {uri} ended the stream at row {start} of {last}",
                               nodes=[uri])
        except Error as exc:
            attempts.failed(exc, uri)
            log.warning("icefloe: Kubeflow shard stream from node %s broke at row %d (rows up "
                        "to %d to go; %s); going on from the next replica", uri, start, last,
                        first_line(exc))
    raise attempts.exhausted(f"rows {start}..{last}")
