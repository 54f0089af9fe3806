"""``EpochPlan``: one consumer's epoch as one typed value.

The fields are the epoch descriptor's (docs/epochs.md; the head's field
table, through _fields.json), each None where the head's default applies.
``CacheDataset`` makes one from its settings and the consumer's place in the
job; ``Client.epoch_info`` and ``Client.iter_epoch`` send it; a failover
reads the same plan from a later batch (``replace(first_batch=...)``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ._protocol import encode, fields


@dataclasses.dataclass(frozen=True)
class EpochPlan:
    """What one consumer (a rank, or a DataLoader worker of one) reads of an
    epoch: the order (seed, epoch, shuffle and its tuning), its place in the
    job (world_size, rank, num_workers, worker), the batches (batch_size,
    drop_last, columns), where to begin (start, first_batch, or a saved job's
    resume_* figures) and which copy (generation)."""

    batch_size: int | None = None
    seed: int | None = None
    epoch: int | None = None
    shuffle: str | None = None
    block_rows: int | None = None
    window_blocks: int | None = None
    shuffle_within_block: bool | None = None
    world_size: int | None = None
    rank: int | None = None
    num_workers: int | None = None
    worker: int | None = None
    drop_last: bool | None = None
    start: int | None = None
    first_batch: int | None = None
    columns: Sequence[str] | None = None
    generation: int | None = None
    resume_steps: int | None = None
    resume_world_size: int | None = None
    resume_batch_size: int | None = None
    order_version: int | None = None

    def replace(self, **changes: Any) -> EpochPlan:
        """This plan with ``changes``; TypeError naming a field the epoch
        descriptor does not have."""
        names = {f.name for f in dataclasses.fields(self)}
        for name in changes:
            if name not in names:
                raise TypeError(f"epoch descriptor has no field {name!r} (fields: "
                                f"{', '.join(fields('epoch descriptor'))})")
        return dataclasses.replace(self, **changes)

    def descriptor(self, dataset: str) -> dict[str, Any]:
        """The epoch descriptor's JSON body for ``dataset``, checked field by field."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        if isinstance(self.columns, tuple):
            values["columns"] = list(self.columns)
        return encode("epoch descriptor", dataset=dataset, **values)
