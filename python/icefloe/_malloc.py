"""Keeps glibc malloc from handing receive buffers back to the kernel.

A Flight stream allocates and frees megabytes of gRPC receive buffers per
batch. glibc returns such memory to the kernel (large blocks are mmap'd,
heap tops trimmed), so every batch pays page faults and page zeroing again:
~20% of a training process's CPU while it streams an epoch. Raising the mmap
and trim thresholds lets those blocks be reused (measured: block-shuffled
epoch 18 -> 22 M rows/s, peak RSS +17 MB; benchmarks/README.md).

Applied once, by the first icefloe Client in a process, on glibc only.
``ICEFLOE_MALLOC_TUNING=0`` turns it off; explicit glibc settings
(GLIBC_TUNABLES, MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_) win.
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's maximum on 64-bit
TRIM_THRESHOLD = 256 << 20

_lock = threading.Lock()
_done = False


def _user_configured() -> bool:
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    return ("malloc.mmap_threshold" in tunables or "malloc.trim_threshold" in tunables
            or "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ)


def tune_for_streaming() -> bool:
    """Raises glibc's mmap and trim thresholds once per process; True if applied."""
    global _done
    with _lock:
        if _done:
            return False
        _done = True
        if os.environ.get("ICEFLOE_MALLOC_TUNING", "1") == "0" or _user_configured():
            return False
        if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
            return False
        try:
            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError):
            return False
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        mallopt.restype = ctypes.c_int
        return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and \
            bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
