"""What the torch datasets share: the job's (rank, world_size), one Client
per process, and the progress the main process shares with persistent
DataLoader workers."""

from __future__ import annotations

import json
import multiprocessing
import os
from typing import Any

import torch

from .client import Client


def distributed_coordinates() -> tuple[int, int]:
    """(rank, world_size): torch.distributed when initialised, else RANK/WORLD_SIZE, else 0/1."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def live_coordinates() -> tuple[int, int] | None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return None



class ClusterClient:
    """One Client per process (Flight clients must not cross a fork), never pickled."""

    head_uri: str
    _token: str | None
    _tls_root_certs: str | bytes | None
    _client: Client | None = None
    client_options: dict[str, Any] | None = None  # more Client arguments (failover_timeout_s)

    def __getstate__(self) -> dict[str, Any]:
        # Pickled for spawn/forkserver DataLoader workers, in the main process:
        # the moment to pin the rank they cannot discover themselves.
        state = self.__dict__.copy()
        state["_client"] = None
        state["_dist"] = distributed_coordinates()
        return state

    def client(self) -> Client:
        pid = os.getpid()
        if self._client is None or getattr(self, "_client_pid", None) != pid:
            self._client = Client(self.head_uri, token=self._token,
                                  tls_root_certs=self._tls_root_certs,
                                  **(self.client_options or {}))
            self._client_pid = pid
        return self._client


class SharedProgress:
    """What the main process last chose to read (epoch, seed, order, start),
    shared with DataLoader workers that outlive an epoch
    (``persistent_workers=True``): they keep their own copy of the dataset,
    which set_epoch and load_state_dict in the main process never touch. A
    version number says when it changed. Crosses into workers only while
    they are being started (shared memory can only be passed then)."""

    SIZE = 1024

    def __init__(self) -> None:
        # No lock: a lock made in one multiprocessing context cannot cross into
        # workers started by another (forkserver, spawn). The main process
        # writes between epochs, before the DataLoader wakes its workers; a
        # reader still takes two equal copies to rule out a torn one.
        self._block = multiprocessing.Array("c", self.SIZE, lock=False)

    def write(self, values: dict[str, Any]) -> None:
        raw = json.dumps(values).encode()
        if len(raw) > self.SIZE:
            raise ValueError("resume state too large to share with DataLoader workers")
        self._block.raw = raw.ljust(self.SIZE, b"\0")

    def read(self) -> dict[str, Any] | None:
        for _ in range(100):
            first, second = bytes(self._block.raw), bytes(self._block.raw)
            if first == second:
                raw = first.rstrip(b"\0")
                return json.loads(raw) if raw else None
        raise RuntimeError("the shared epoch state kept changing while being read")
