"""A host's one copy of a dataset's row length codes (docs/epochs.md
section 7, "Codes"): a file of the host's codes directory named by what the
codes are *of* (a ``CodesKey``: the head, the copy's storage name and
generation, the column, the rows and the budget), made by the first consumer
of a host and mapped by every other rank and DataLoader worker without
fetching the lengths.

The file: a fixed prefix (magic, format, header size, the header's CRC-32),
a JSON header (the key, the code table, the codes' offset and CRC-32), then
the codes, a byte a row, at a page-aligned offset. A file is mapped only
where every part checks out (owner, magic, format, header CRC, key, size,
codes CRC, every code in the table); anything else is ignored, never
trusted, and made again (written to a temporary file, renamed into place).

Single flight: the consumers that miss take an ``flock`` on the key's lock
file, waiting at most ``$ICEFLOE_CODES_WAIT_S`` seconds (default 60); the
holder makes and publishes the codes, the others then map them. A holder
that dies (SIGKILL included) drops its lock with its file descriptor; one
that is slow past the wait is not waited for: the waiter makes its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import math
import os
import struct
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ._length_codes import LengthCodes

# Bump when the layout below or encode_lengths' coding changes: a file of
# another format is another key's (ignored, then trimmed).
_FORMAT = 1
_MAGIC = b"ICFCODES"
_PREFIX = struct.Struct("<8sIII")  # magic, format, header bytes, header CRC-32
_MAX_HEADER_BYTES = 1 << 20  # the header holds at most 256 codes' table (~15 KB)
_ALIGN = 4096  # the codes' offset: a page, so the map starts on one
_SCAN_BYTES = 4 << 20  # codes checked (CRC-32 and largest code) at a time
_MAX_SHARED_FILES = 8  # codes files (and lock files) a codes directory keeps
_WAIT_S = 60.0  # default bound on waiting for another consumer's codes
_POLL_S = (0.001, 0.02)  # the lock's first and longest pause between tries


@dataclasses.dataclass(frozen=True)
class CodesKey:
    """What a codes file holds the codes of: the copy's exact rows (a head,
    a storage name and a generation, which no other load of that head's
    lineage reuses), its column and row count, and the budget they are
    coded for. ``rows`` is also the codes' length."""

    head: str
    dataset: str
    generation: int
    column: str
    rows: int
    batch_tokens: int

    def as_json(self) -> dict[str, Any]:
        return {"format": _FORMAT, **dataclasses.asdict(self)}

    def file_name(self) -> str:
        text = json.dumps(self.as_json(), sort_keys=True).encode()
        return f"codes-{hashlib.blake2b(text, digest_size=16).hexdigest()}.u8"


@dataclasses.dataclass
class CodesCounters:
    """What this process's ``host_codes`` did, since it started: codes made
    (fetched and coded), files mapped, files ignored as not checking out,
    and waits on another consumer that ran out."""

    made: int = 0
    mapped: int = 0
    rejected: int = 0
    wait_timeouts: int = 0


counters = CodesCounters()
_counters_lock = threading.Lock()


def _count(field: str) -> None:
    with _counters_lock:
        setattr(counters, field, getattr(counters, field) + 1)


def host_codes(key: CodesKey, make: Callable[[], LengthCodes]) -> LengthCodes:
    """The codes of ``key``: the host's file mapped read-only where one
    checks out, else ``make()`` (which fetches and codes the lengths) by one
    consumer of the host at a time, published for the others. Where the
    directory is off (``ICEFLOE_CODES_DIR=""``), not this user's alone, or
    cannot take the file, the codes ``make()`` returns stay private.
    Exceptions of ``make()`` propagate (the lock is released)."""
    directory = _usable_dir()
    if directory is None or key.rows <= 0:
        return _made(make)
    path = directory / key.file_name()
    found = _map_checked(path, key)
    if found is not None:
        return found
    with _single_flight(directory / f".{path.stem}.lock") as held:
        if held:  # the codes may have been made while this consumer waited
            found = _map_checked(path, key)
            if found is not None:
                return found
        codes = _made(make)
        return _publish(directory, path, key, codes)


def _made(make: Callable[[], LengthCodes]) -> LengthCodes:
    codes = make()
    _count("made")
    return codes


def codes_dir() -> Path | None:
    """``$ICEFLOE_CODES_DIR`` ("": none, each process's codes private), else
    ``/dev/shm/icefloe-codes``, else the temporary directory's."""
    chosen = os.environ.get("ICEFLOE_CODES_DIR")
    if chosen is not None:
        return Path(chosen) if chosen else None
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    return base / "icefloe-codes"


def _usable_dir() -> Path | None:
    """The codes directory, made where missing, where only this user can
    write it (a file another user placed is never mapped); else None."""
    directory = codes_dir()
    if directory is None:
        return None
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = directory.stat()
    except OSError:
        return None
    return directory if st.st_uid == os.getuid() and not st.st_mode & 0o022 else None


def wait_s() -> float:
    """``$ICEFLOE_CODES_WAIT_S``: how long a consumer waits for another to
    make the codes (default 60). ValueError naming it where it is not a
    finite number >= 0."""
    text = os.environ.get("ICEFLOE_CODES_WAIT_S")
    if text is None or text == "":
        return _WAIT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"ICEFLOE_CODES_WAIT_S={text!r}: not a finite number of seconds >= 0")
    return value


# Lock descriptors open in this process: a forked child closes its copies,
# which would otherwise hold the flock (it is the open file's) for as long
# as the child lives.
_lock_fds: set[int] = set()


def _close_locks_in_child() -> None:
    for fd in _lock_fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    _lock_fds.clear()


os.register_at_fork(after_in_child=_close_locks_in_child)


@contextlib.contextmanager
def _single_flight(lock_path: Path) -> Iterator[bool]:
    """Holds the lock file's ``flock`` (yields True), or yields False where
    it was not had within ``wait_s()`` or cannot be taken here. The lock
    goes with the descriptor: on exit, or when the process dies (a child
    forked meanwhile closes its copy)."""
    limit_s = wait_s()
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield False
        return
    _lock_fds.add(fd)
    try:
        deadline = time.monotonic() + limit_s
        pause = _POLL_S[0]
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = True
                break
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    _count("wait_timeouts")
                    held = False
                    break
                time.sleep(min(pause, left))
                pause = min(pause * 2, _POLL_S[1])
            except OSError:  # no locks here (some network file systems)
                held = False
                break
        if held:
            with contextlib.suppress(OSError):
                os.utime(fd)  # in use: kept by the trim
        yield held
    finally:
        _lock_fds.discard(fd)
        os.close(fd)


def _map_checked(path: Path, key: CodesKey) -> LengthCodes | None:
    """The codes of ``path`` where every part checks out against ``key``
    (counted as mapped), None where there is no file, or where it does not
    (counted as rejected)."""
    try:
        f = open(path, "rb")  # closed below; the map outlives it
    except OSError:
        return None
    try:
        with f:  # one open file: what is checked is what is mapped
            codes = _checked(f, key)
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        codes = None
    if codes is None:
        _count("rejected")
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # in use: the newest
    _count("mapped")
    return codes


def _checked(f: Any, key: CodesKey) -> LengthCodes | None:
    st = os.fstat(f.fileno())
    if st.st_uid != os.getuid():
        return None
    magic, fmt, header_bytes, header_crc = _PREFIX.unpack(f.read(_PREFIX.size))
    if magic != _MAGIC or fmt != _FORMAT or header_bytes > _MAX_HEADER_BYTES:
        return None
    text = f.read(header_bytes)
    if len(text) != header_bytes or zlib.crc32(text) != header_crc:
        return None
    header = json.loads(text)
    offset = header["offset"]
    if (header["key"] != key.as_json() or not isinstance(offset, int) or offset % _ALIGN
            or offset < _PREFIX.size + header_bytes or st.st_size != offset + key.rows):
        return None
    upper = np.asarray(header["upper"], np.int64)
    mean = np.asarray(header["mean"], np.float64)
    mean_sq = np.asarray(header["mean_sq"], np.float64)
    if (upper.ndim != 1 or not 0 < len(upper) <= 256 or mean.shape != upper.shape
            or mean_sq.shape != upper.shape):
        return None
    codes = np.memmap(f, dtype=np.uint8, mode="r", offset=offset, shape=(key.rows,))
    crc, top = _scan(codes)
    if crc != header["crc32"] or top >= len(upper):
        return None
    return LengthCodes(codes, upper, mean, mean_sq, bool(header["exact"]),
                       int(header["longest"]), key.batch_tokens, key.generation)


def _scan(codes: np.ndarray) -> tuple[int, int]:
    """The codes' CRC-32 and largest code, a few MiB at a time."""
    crc, top = 0, 0
    for i in range(0, len(codes), _SCAN_BYTES):
        chunk = codes[i:i + _SCAN_BYTES]
        crc = zlib.crc32(chunk, crc)
        top = max(top, int(chunk.max()))
    return crc, top


def _publish(directory: Path, path: Path, key: CodesKey, codes: LengthCodes) -> LengthCodes:
    """Writes ``codes`` as the file of ``key`` (a temporary file renamed into
    place, so no reader sees part of one) and returns them mapped from it;
    ``codes`` themselves where the directory cannot take the file."""
    data = np.ascontiguousarray(codes.codes)
    if data.dtype != np.uint8 or len(data) != key.rows:
        return codes
    crc, _ = _scan(data)
    header = {"key": key.as_json(), "crc32": crc, "exact": bool(codes.exact),
              "longest": int(codes.longest), "upper": [int(v) for v in codes.upper],
              "mean": [float(v) for v in codes.mean],
              "mean_sq": [float(v) for v in codes.mean_sq]}
    # The offset's digits change the header's size: a page past it is room.
    header["offset"] = 0
    size = len(json.dumps(header).encode()) + 32
    header["offset"] = -(-(_PREFIX.size + size) // _ALIGN) * _ALIGN
    text = json.dumps(header).encode()
    tmp = directory / f".{path.name}.{os.getpid()}.{threading.get_ident()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(_PREFIX.pack(_MAGIC, _FORMAT, len(text), zlib.crc32(text)))
            f.write(text)
            f.write(bytes(header["offset"] - _PREFIX.size - len(text)))
            for i in range(0, len(data), _SCAN_BYTES):
                f.write(memoryview(data[i:i + _SCAN_BYTES]))
        os.replace(tmp, path)
        mapped = np.memmap(str(path), dtype=np.uint8, mode="r", offset=header["offset"],
                           shape=(key.rows,))
    except OSError:  # full or read-only: the codes stay private
        return codes
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    _trim(directory)
    return dataclasses.replace(codes, codes=mapped)


def _trim(directory: Path) -> None:
    """Unlinks all but the latest ``_MAX_SHARED_FILES`` codes files, and as
    many lock files (a process that mapped a file keeps its mapping; one
    waiting on an unlinked lock at worst makes the codes itself)."""
    for pattern in ("codes-*.u8", ".codes-*.lock"):
        files = []
        for f in directory.glob(pattern):
            try:
                files.append((f.stat().st_mtime, f))
            except OSError:  # unlinked by another process meanwhile
                continue
        for _, f in sorted(files, reverse=True)[_MAX_SHARED_FILES:]:
            with contextlib.suppress(OSError):
                f.unlink()
