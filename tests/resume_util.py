"""Checkpoint and resume as the CacheDataset tests play them: a job runs some
steps on each of its ranks and checkpoints; another job (another world size,
batch size or number of workers) resumes from that checkpoint and reads the
rest of the epoch. The tests keep their own assertions on what each job read;
these helpers only run the jobs."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from itertools import islice
from typing import Any

from ddp_util import as_rank

# The test process talks to the cluster, and gRPC cannot be used after fork:
# DataLoader workers start from a forkserver.
CONTEXT = "forkserver"


def batch_ids(batches: Iterable) -> list[list[int]]:
    """Each batch's `id` column, as a list."""
    return [b["id"].tolist() for b in batches]


def through_torch_save(state: dict) -> dict:
    """`state` saved with torch.save and loaded back, as a training script
    keeps its checkpoint."""
    import torch  # lazily, as the tests that skip without it

    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


def run_then_resume(first: Callable[[], Any], resumed: Callable[[], Any], steps: int,
                    world_size: int, new_world_size: int, *, epoch: int | None = None,
                    num_workers: int = 0, saved: bool = False,
                    rows: Callable[[Any], list] = lambda b: b["id"].tolist(),
                    ) -> tuple[list, list[list[list]], dict]:
    """Runs `steps` steps on each of `world_size` ranks (a dataset from
    `first()` per rank, at `epoch` when given), checkpoints after them
    (`state_dict(steps=steps)`), then resumes on each of `new_world_size`
    ranks (a dataset from `resumed()`, read to the end of its epoch in this
    process, or through a DataLoader of `num_workers` workers).

    Returns (taken, per_rank, state): the rows the first job read, rank after
    rank; each resumed rank's batches, as `rows(batch)` gives them; the
    checkpoint (`saved`: through torch.save and torch.load)."""
    from torch.utils.data import DataLoader
    taken: list = []
    for r in range(world_size):
        with as_rank(r, world_size):
            ds = first()
            if epoch is not None:
                ds.set_epoch(epoch)
            taken += [i for b in islice(ds, steps) for i in rows(b)]
            state = ds.state_dict(steps=steps)
    if saved:
        state = through_torch_save(state)
    per_rank = []
    for r in range(new_world_size):
        with as_rank(r, new_world_size):
            ds = resumed()
            ds.load_state_dict(state)
            source = DataLoader(ds, batch_size=None, num_workers=num_workers,
                                multiprocessing_context=CONTEXT) if num_workers else ds
            per_rank.append([rows(b) for b in source])
    return taken, per_rank, state


def assert_loader_resumes(loader: Callable[[], Any], steps: int = 5) -> None:
    """A StatefulDataLoader (from `loader()`) checkpointed after `steps`
    batches, and a new one resumed from that checkpoint, yield together the
    batches of one uninterrupted epoch, in order."""
    full = batch_ids(loader())
    first = loader()
    it = iter(first)
    head = [next(it)["id"].tolist() for _ in range(steps)]
    state = first.state_dict()
    del it
    second = loader()
    second.load_state_dict(state)
    assert head + batch_ids(second) == full
