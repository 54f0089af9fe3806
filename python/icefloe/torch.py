"""PyTorch datasets over an icefloe cache.

- :class:`CacheDataset`: an ``IterableDataset`` that reads this consumer's
  share of each epoch (exact sharding over ranks x DataLoader workers, per-epoch
  shuffling, resumable). Use it with ``DataLoader(ds, batch_size=None)``.
- :class:`DataCacheDataset`: Kubeflow Trainer's data-cache example usage
  (``from_arrow_rb_to_tensor`` hook, 128-row chunks), over Kubeflow's protocol.
- :class:`MixtureDataset`: what ``CacheDataset(head, {name: weight}, ...)``
  makes: a weighted mixture of cached datasets (a :class:`Mixture`).
- :class:`CacheMapDataset`: map-style, batched random access, any sampler.

``torch`` is imported when this module is, never by ``import icefloe``.
"""

from __future__ import annotations

from ._cache_dataset import FOLLOWS, ORDER_VERSION, SHUFFLES, CacheDataset
from ._kubeflow_dataset import DataCacheDataset
from ._map_dataset import CacheMapDataset
from ._mixture import Mixture
from ._mixture_dataset import MixtureDataset
from ._tensors import batch_to_tensors, batches_to_tensors
from ._torch_cluster import distributed_coordinates

__all__ = ["FOLLOWS", "ORDER_VERSION", "SHUFFLES", "CacheDataset", "CacheMapDataset",
           "DataCacheDataset", "Mixture", "MixtureDataset", "batch_to_tensors",
           "batches_to_tensors", "distributed_coordinates"]
