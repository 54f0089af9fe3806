"""DataCacheDataset: Kubeflow Trainer's data-cache dataset, over Kubeflow's protocol."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from torch.utils.data import IterableDataset, get_worker_info

from ._tensors import batch_to_tensors
from ._torch_cluster import ClusterClient, distributed_coordinates, live_coordinates
from .client import Client


class DataCacheDataset(ClusterClient, IterableDataset):
    """Kubeflow Trainer's data-cache dataset usage, over Kubeflow's protocol.

    Reads shard ``(worker * world_size + rank + seed) % total`` of
    ``total = num_workers * world_size`` from the head (PATH descriptors),
    re-chunks every record batch to ``batch_size`` rows and yields what
    :meth:`from_arrow_rb_to_tensor` yields for each chunk. Use with
    ``DataLoader(ds, batch_size=None)``. The head defaults to
    ``grpc://$TRAIN_JOB_NAME-cache-service:50051``. Like :class:`CacheDataset`
    it fails over when a data node dies: a broken stream goes on from the row
    it reached on another replica (load with replication >= 2), and every row
    of the shard is yielded once.
    """

    def __init__(self, head_uri: str | None = None, batch_size: int = 128, seed: int = 0,
                 token: str | None = None, tls_root_certs: str | bytes | None = None) -> None:
        super().__init__()
        if head_uri is None:
            head_uri = f"grpc://{os.environ['TRAIN_JOB_NAME']}-cache-service:50051"
        self.head_uri = head_uri
        self.batch_size = batch_size
        self.seed = seed
        self._token = token
        self._tls_root_certs = tls_root_certs

    def set_epoch(self, epoch: int) -> None:
        """Kubeflow's per-epoch "shuffle": rotate which shard a consumer reads."""
        self.seed += epoch

    def from_arrow_rb_to_tensor(self, chunk: pa.RecordBatch) -> Iterator[Any]:
        """Override to turn a chunk into samples; the default yields one dict of tensors."""
        yield batch_to_tensors(chunk)

    def __iter__(self) -> Iterator[Any]:
        rank, world_size = live_coordinates() or getattr(self, "_dist", None) or \
            distributed_coordinates()
        info = get_worker_info()
        num_workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        total = num_workers * world_size
        index = (worker * world_size + rank + self.seed) % total
        # Through Client like the other datasets (mapped errors; failover to
        # another replica, also mid-stream, from the row reached); one per
        # pass, closed after it, as Kubeflow's loop does.
        client = Client(self.head_uri, token=self._token, tls_root_certs=self._tls_root_certs)
        try:
            for rb in client.iter_kubeflow_shard(index, total):
                for start in range(0, rb.num_rows, self.batch_size):
                    yield from self.from_arrow_rb_to_tensor(rb.slice(start, self.batch_size))
        finally:
            client.close()
