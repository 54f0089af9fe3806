"""CacheMapDataset: map-style access to a cached dataset by global row id."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from torch.utils.data import Dataset

from ._tensors import batch_to_tensors
from ._torch_cluster import ClusterClient
from .client import Client


class CacheMapDataset(ClusterClient, Dataset):
    """Map-style access to a cached dataset by global row id, for any sampler.

    ``ds[i]`` is one row as a dict; ``__getitems__`` (used by DataLoader for
    a whole sampled batch) fetches all rows in one gather per node. With
    ``batched=True`` it returns one dict of tensors for the batch; pair it
    with ``collate_fn=lambda batch: batch``.
    """

    def __init__(self, head_uri: str, dataset: str, columns: list[str] | None = None,
                 token: str | None = None, tls_root_certs: str | bytes | None = None,
                 batched: bool = False, client_options: dict[str, Any] | None = None) -> None:
        self.head_uri = head_uri
        self.dataset = dataset
        self.columns = columns
        self.batched = batched
        self.client_options = client_options
        self._token = token
        self._tls_root_certs = tls_root_certs
        self._client: Client | None = None
        self._len: int | None = None

    def __len__(self) -> int:
        if self._len is None:
            self._len = int(self.client().describe(self.dataset)["rows"])
        return self._len

    def _take(self, indices: list[int]) -> pa.Table:
        return self.client().take(self.dataset, indices, columns=self.columns)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self._take([int(index)]).to_pylist()[0]

    def __getitems__(self, indices: list[int]) -> Any:
        table = self._take([int(i) for i in indices])
        if self.batched:
            return batch_to_tensors(table.combine_chunks().to_batches()[0]) if table.num_rows \
                else {}
        return table.to_pylist()
