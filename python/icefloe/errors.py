"""Exceptions raised by icefloe, and the one place server errors are mapped.

Every error a server returns becomes a subclass of :class:`Error`, chosen by
the Flight status code, so callers can catch precisely what they handle.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.flight as flight


class Error(Exception):
    """Base class of every icefloe error."""


class InvalidArgument(Error, ValueError):
    """Malformed input: a bad ticket, descriptor, range, filter or option."""


class NotFound(Error, KeyError):
    """An unknown dataset or other name."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable.
        return str(self.args[0]) if self.args else ""


class AlreadyExists(Error):
    """A name that is already taken (e.g. being loaded with other arguments)."""


class Cancelled(Error):
    """The operation was cancelled (an evict during a load, a shutdown)."""


class OutOfMemory(Error, MemoryError):
    """A dataset does not fit in the memory budget."""


class Unauthenticated(Error, PermissionError):
    """The call carried no valid token."""


class Unauthorized(Error, PermissionError):
    """The caller may not do this."""


class Unavailable(Error, ConnectionError):
    """A server could not be reached or is shutting down."""


class StreamBroken(Unavailable):
    """A data node stopped answering in the middle of a read (killed, restarted,
    unreachable). ``nodes`` names the nodes tried, ``dataset`` the dataset. The
    client fails over by itself; this reaches a caller only where it cannot."""

    def __init__(self, msg: str, *, nodes: list[str] | None = None,
                 dataset: str | None = None) -> None:
        super().__init__(msg)
        self.nodes = list(nodes or [])
        self.dataset = dataset


class DataUnavailable(Unavailable):
    """Rows of a dataset cannot be read: no live node holds them and the head
    did not repair the dataset within the client's ``failover_timeout_s``.
    ``nodes`` names the nodes that held them, ``dataset`` the dataset."""

    def __init__(self, msg: str, *, nodes: list[str] | None = None,
                 dataset: str | None = None) -> None:
        super().__init__(msg)
        self.nodes = list(nodes or [])
        self.dataset = dataset


class RowsNotHeld(Unavailable):
    """A data node was asked for rows it does not all hold: it was restarted
    with part of its copy (what it kept on its disk tier) and the head has not
    yet seen what it lost, or a client counted fewer rows than it asked a node
    for. Another replica may hold them: the client fails over on it as on an
    unreachable node; it reaches a caller only inside a :class:`StreamBroken`
    or :class:`DataUnavailable` when no replica had the rows."""


class Busy(Unavailable):
    """The server is at a bound (e.g. too many loads queued); retry later."""


class StorageError(Error, OSError):
    """Reading the table's files failed (missing, unreadable, corrupt)."""


class Timeout(Error, TimeoutError):
    """A call or a wait passed its deadline."""


class NotImplementedByServer(Error, NotImplementedError):
    """The server does not implement this call."""


class ServerError(Error):
    """Any other server-side failure (storage errors included)."""


class ProtocolError(ServerError):
    """A server's reply broke the protocol: a field missing, of the wrong type
    or out of its range (the message names the reply and the field)."""


# Kinds the servers name in a Flight error's extra_info (see common/wire_status.h).
_EXTRA_INFO: dict[bytes, type[Error]] = {
    b"icefloe:OutOfMemory": OutOfMemory,
    b"icefloe:IOError": StorageError,
    b"icefloe:NodeUnavailable": Unavailable,
    b"icefloe:AlreadyExists": AlreadyExists,
    b"icefloe:Busy": Busy,
    b"icefloe:Cancelled": Cancelled,
    b"icefloe:Internal": ServerError,
    b"icefloe:RowsNotHeld": RowsNotHeld,
}


def map_error(exc: BaseException) -> BaseException:
    """Translates a pyarrow/Flight exception into the matching icefloe error."""
    if isinstance(exc, Error):
        return exc
    msg = _clean(str(exc))
    kind = _EXTRA_INFO.get(getattr(exc, "extra_info", None) or b"")
    if kind is not None:
        return _with_cause(kind(msg), exc)
    table: list[tuple[type, type[Error]]] = [
        (flight.FlightUnauthenticatedError, Unauthenticated),
        (flight.FlightUnauthorizedError, Unauthorized),
        (flight.FlightUnavailableError, Unavailable),
        (flight.FlightTimedOutError, Timeout),
        (flight.FlightCancelledError, Cancelled),
        (pa.ArrowInvalid, InvalidArgument),
        (pa.ArrowKeyError, NotFound),
        (KeyError, NotFound),
        (pa.ArrowNotImplementedError, NotImplementedByServer),
        (pa.ArrowMemoryError, OutOfMemory),
        (pa.ArrowIndexError, InvalidArgument),
        (pa.ArrowIOError, StorageError),
    ]
    for src, dst in table:
        if isinstance(exc, src):
            return _with_cause(dst(msg), exc)
    if isinstance(exc, flight.FlightError):
        for marker, dst in _MARKERS:
            if marker in msg:
                return _with_cause(dst(msg), exc)
        return _with_cause(ServerError(msg), exc)
    return exc


# Status codes that Flight carries only as text in a generic server error.
_MARKERS: list[tuple[str, type[Error]]] = [
    ("Out of memory", OutOfMemory),
    ("OutOfMemory", OutOfMemory),
    ("Key error", NotFound),
    ("Invalid argument", InvalidArgument),
    ("NotImplemented", NotImplementedByServer),
]


def _with_cause(err: Error, cause: BaseException) -> Error:
    err.__cause__ = cause
    return err


def _clean(msg: str) -> str:
    # Drop gRPC's trailing debug context; keep the server's message.
    for marker in (". Detail:", ". gRPC client debug context:", "\ngRPC client debug context"):
        if marker in msg:
            msg = msg.split(marker, 1)[0]
    return msg.strip()


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
