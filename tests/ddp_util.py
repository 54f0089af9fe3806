"""Workers for multi-process tests (imported by spawned processes)."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path


@contextmanager
def as_rank(rank: int, world_size: int):
    """Plays one rank of a job in this process (via RANK/WORLD_SIZE)."""
    old = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE")}
    os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world_size)})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def ddp_epochs(rank: int, world_size: int, init_file: str, head: str, dataset: str,
               out_dir: str, configs: list[dict]) -> None:
    """One DDP rank: reads each config's epochs through a DataLoader, with a
    collective per step (a rank with fewer batches would hang its peers)."""
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader

    from icefloe.torch import CacheDataset

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=60))
    results = []
    for cfg in configs:
        ds = CacheDataset(head, dataset, batch_size=cfg["batch_size"], shuffle=cfg["shuffle"],
                          seed=cfg.get("seed", 0), drop_last=cfg["drop_last"], prefetch=2)
        epochs = []
        for epoch in cfg["epochs"]:
            ds.set_epoch(epoch)
            # gRPC cannot be used after fork: workers start from a forkserver.
            loader = DataLoader(ds, batch_size=None, num_workers=cfg["num_workers"],
                                multiprocessing_context="forkserver" if cfg["num_workers"]
                                else None)
            batches = []
            for batch in loader:
                dist.all_reduce(torch.ones(1))  # every rank must reach every step
                batches.append(batch["id"].tolist())
            epochs.append(batches)
        results.append({"config": cfg, "epochs": epochs})
    dist.barrier()
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(results))
    dist.destroy_process_group()
    os._exit(0)  # skip interpreter teardown of DataLoader/gRPC threads
