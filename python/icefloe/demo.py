"""The quick-start demo: train a PyTorch model from an icefloe cache.

1. Writes an Iceberg table with pyiceberg (SQL catalog on sqlite, local
   warehouse; ``--s3`` puts it in a loopback S3 server instead).
2. Starts a local cluster (head + 3 data nodes) and loads the table with a
   projection and a filter (or uses a running cluster: ``--head``).
3. Trains a small model with 2 DDP ranks (gloo, CPU) x 2 DataLoader workers
   for 2 epochs with block shuffling, reading from the cache.
4. Runs the same loop reading the table's Parquet files directly, and prints
   both side by side: rows and GB/s per epoch, epoch times, and the share of
   step time spent waiting for data.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from torch.utils.data import IterableDataset, get_worker_info

FEATURES = [f"f{i}" for i in range(16)]
COLUMNS = ["label", *FEATURES]
FILTER = "label < 9"
ROW_BYTES = 8 + 4 + 4 * len(FEATURES) + 24  # id, label, features, text (approx.)


def _bar(**kwargs: Any):
    from tqdm import tqdm

    return tqdm(**kwargs, dynamic_ncols=True, file=sys.stdout)


# -- the table ---------------------------------------------------------------


def write_table(root: Path, size_mb: int, files: int, s3: dict | None, seed: int = 0):
    from pyiceberg.catalog.sql import SqlCatalog

    props: dict[str, str] = {}
    warehouse = (root / "warehouse").as_uri()
    if s3:
        warehouse = "s3://warehouse/demo"
        props = {"s3.endpoint": s3["endpoint"], "s3.access-key-id": "testing",
                 "s3.secret-access-key": "testing", "s3.region": "us-east-1"}
    catalog = SqlCatalog("demo", uri=f"sqlite:///{root / 'catalog.db'}", warehouse=warehouse,
                         **props)
    catalog.create_namespace_if_not_exists("demo")
    rows = max(files, size_mb * 1_000_000 // ROW_BYTES)
    per_file = rows // files
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((10, len(FEATURES))).astype(np.float32)
    table = None
    with _bar(total=rows, unit="row", unit_scale=True, desc="writing Iceberg table") as bar:
        for k in range(files):
            n = per_file if k < files - 1 else rows - per_file * (files - 1)
            ids = np.arange(k * per_file, k * per_file + n, dtype=np.int64)
            labels = rng.integers(0, 10, n, dtype=np.int32)
            feats = centers[labels] + rng.standard_normal((n, len(FEATURES)), dtype=np.float32)
            data = pa.table({"id": ids, "label": labels,
                             **{f: feats[:, i] for i, f in enumerate(FEATURES)},
                             "text": pa.array(np.char.add("sample-", ids.astype(str)))})
            if table is None:
                table = catalog.create_table("demo.samples", schema=data.schema)
            table.append(data)
            bar.update(n)
    return table, rows


# -- training (one process per DDP rank) ---------------------------------------


def _train_rank(rank: int, world: int, init: str, source: dict, args: dict, out: str) -> None:
    import torch.distributed as dist
    from torch.distributed.algorithms.join import Join
    from torch.utils.data import DataLoader

    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(len(FEATURES), 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    dataset = _make_dataset(source, args)
    loader = DataLoader(dataset, batch_size=None, num_workers=args["workers"],
                        multiprocessing_context="forkserver" if args["workers"] else None,
                        persistent_workers=bool(args["workers"]))
    epochs = []
    for epoch in range(args["epochs"]):
        dataset.set_epoch(epoch)
        rows = steps = 0
        wait = compute = 0.0
        loss_sum = 0.0
        bar = _bar(desc=f"{source['kind']} epoch {epoch}", unit="step", leave=False) \
            if rank == 0 else None
        start = tick = time.perf_counter()
        # Join: the Parquet baseline gives ranks unequal batch counts (icefloe
        # never does), which would otherwise hang DDP at the end of the epoch.
        with Join([model]):
            for batch in loader:
                got = time.perf_counter()
                wait += got - tick
                x = torch.stack([batch[f] for f in FEATURES], dim=1)
                y = batch["label"].long()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                rows += len(y)
                steps += 1
                loss_sum += loss.item()
                tick = time.perf_counter()
                compute += tick - got
                if bar is not None:
                    bar.update(1)
        if bar is not None:
            bar.close()
        elapsed = time.perf_counter() - start
        epochs.append({"rows": rows, "steps": steps, "seconds": elapsed, "wait": wait,
                       "compute": compute, "loss": loss_sum / max(steps, 1)})
    dist.barrier()
    Path(out, f"{source['kind']}-rank{rank}.json").write_text(json.dumps(epochs))
    dist.destroy_process_group()
    os._exit(0)  # DataLoader and gRPC threads need no teardown


def _make_dataset(source: dict, args: dict):
    if source["kind"] == "icefloe":
        from .torch import CacheDataset

        return CacheDataset(source["head"], source["dataset"], batch_size=args["batch_size"],
                            shuffle="block", seed=0, drop_last=True, columns=COLUMNS)
    return ParquetDataset(source["files"], args["batch_size"], source.get("s3"))


class ParquetDataset(IterableDataset):
    """The baseline: each epoch reads the table's Parquet files with pyarrow,
    files split across ranks x workers, in a per-epoch shuffled file order."""

    def __init__(self, files: list[str], batch_size: int, s3: dict | None) -> None:
        self.files, self.batch_size, self.s3, self.epoch = files, batch_size, s3, 0
        self.rank, self.world = 0, 1
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            self.rank, self.world = torch.distributed.get_rank(), torch.distributed.get_world_size()

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        import pyarrow.compute as pc
        import pyarrow.dataset as ds
        import pyarrow.fs

        from .torch import batch_to_tensors

        info = get_worker_info()
        k, w = (info.num_workers, info.id) if info else (1, 0)
        order = np.random.default_rng(self.epoch).permutation(len(self.files))
        mine = [self.files[i] for i in order[self.rank * k + w::self.world * k]]
        if not mine:
            return
        fs = None
        if self.s3:
            fs = pyarrow.fs.S3FileSystem(endpoint_override=self.s3["endpoint"], scheme="http",
                                         access_key="testing", secret_key="testing",
                                         region="us-east-1")
        data = ds.dataset(mine, format="parquet", filesystem=fs)
        scanner = data.scanner(columns=COLUMNS, filter=pc.field("label") < 9,
                               batch_size=self.batch_size)
        pending: list[pa.RecordBatch] = []
        rows = 0
        for b in scanner.to_batches():  # re-cut to full batches, as a user would
            pending.append(b)
            rows += b.num_rows
            while rows >= self.batch_size:
                merged = pa.Table.from_batches(pending).combine_chunks().to_batches()[0]
                yield batch_to_tensors(merged.slice(0, self.batch_size))
                rest = merged.slice(self.batch_size)
                pending, rows = [rest], rest.num_rows


def train(kind: str, source: dict, args: argparse.Namespace, out: Path) -> list[dict]:
    import torch.multiprocessing as mp

    source = {**source, "kind": kind}
    init = out / f"{kind}.init"
    mp.start_processes(_train_rank, nprocs=args.ranks, join=True, start_method="spawn",
                       args=(args.ranks, str(init), source,
                             {"workers": args.workers, "epochs": args.epochs,
                              "batch_size": args.batch_size}, str(out)))
    per_rank = [json.loads((out / f"{kind}-rank{r}.json").read_text()) for r in range(args.ranks)]
    return [{"rows": sum(r[e]["rows"] for r in per_rank),
             "steps": per_rank[0][e]["steps"],
             "seconds": max(r[e]["seconds"] for r in per_rank),
             "wait_share": sum(r[e]["wait"] for r in per_rank) /
             max(1e-9, sum(r[e]["wait"] + r[e]["compute"] for r in per_rank)),
             "loss": per_rank[0][e]["loss"]}
            for e in range(args.epochs)]


# -- main ------------------------------------------------------------------


def _parquet_files(table) -> list[str]:
    files = [t.file.file_path for t in table.scan().plan_files()]
    return [f.split("://", 1)[1] if f.startswith(("file://", "s3://")) else f for f in files]


def _summary(results: dict[str, list[dict]], row_bytes: int) -> str:
    lines = [f"{'source':<10} {'epoch':>5} {'rows':>11} {'seconds':>8} {'rows/s':>11} "
             f"{'GB/s':>6} {'waiting':>8} {'loss':>6}"]
    for kind, epochs in results.items():
        for e, r in enumerate(epochs):
            rate = r["rows"] / r["seconds"]
            lines.append(f"{kind:<10} {e:>5} {r['rows']:>11,} {r['seconds']:>8.2f} "
                         f"{rate:>11,.0f} {rate * row_bytes / 1e9:>6.2f} "
                         f"{r['wait_share']:>7.1%} {r['loss']:>6.3f}")
    if {"icefloe", "parquet"} <= results.keys():
        a = sum(r["seconds"] for r in results["icefloe"])
        b = sum(r["seconds"] for r in results["parquet"])
        lines.append(f"icefloe epochs took {a:.2f}s vs {b:.2f}s reading Parquet: "
                     f"{b / a:.2f}x faster")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=300, help="table size to generate")
    parser.add_argument("--files", type=int, default=12, help="data files in the table")
    parser.add_argument("--nodes", type=int, default=3, help="data nodes of the local cluster")
    parser.add_argument("--ranks", type=int, default=2, help="DDP ranks")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--s3", action="store_true", help="put the table in a loopback S3 server")
    parser.add_argument("--head", help="use a running cluster at this location")
    parser.add_argument("--skip-parquet", action="store_true", help="skip the baseline loop")
    args = parser.parse_args(argv)

    from .local import LocalCluster

    with tempfile.TemporaryDirectory(prefix="icefloe-demo-") as tmp:
        root = Path(tmp)
        s3 = server = None
        env: dict[str, str] = {}
        try:
            if args.s3:
                s3, server, env = _start_s3()
                os.environ.update(env)
            table, rows = write_table(root, args.size_mb, args.files, s3)
            print(f"table: {rows:,} rows in {args.files} files at {table.metadata_location}")
            cluster = None
            if args.head:
                head = args.head
            else:
                cluster = LocalCluster(num_nodes=args.nodes, memory_limit="4GiB", env=env,
                                       log_dir=root / "logs").start()
                head = cluster.head_uri
                print(f"cluster: head {head}, {args.nodes} data nodes")
            try:
                from .client import Client

                with Client(head) as client, _bar(desc="loading into the cache",
                                                  unit="file") as bar:
                    def progress(p: dict) -> None:
                        bar.total = p.get("tasks_total", 0)
                        bar.n = min(p.get("tasks_done", 0), bar.total or 0)
                        bar.refresh()

                    desc = client.load("demo", table.metadata_location, columns=COLUMNS,
                                       filter=FILTER, batch_size=args.batch_size,
                                       progress=progress)
                print(f"loaded 'demo' ({len(COLUMNS)} of 19 columns where {FILTER}): "
                      f"{desc['rows']:,} rows, {desc['bytes'] / 1e6:,.0f} MB in RAM, "
                      f"{desc['load_seconds']:.2f}s")
                row_bytes = 4 * len(COLUMNS)
                results = {"icefloe": train("icefloe", {"head": head, "dataset": "demo"},
                                            args, root)}
                if not args.skip_parquet:
                    results["parquet"] = train("parquet", {"files": _parquet_files(table),
                                                           "s3": s3}, args, root)
                print(f"\n{args.ranks} DDP ranks x {args.workers} DataLoader workers, "
                      f"batch {args.batch_size}, block shuffle:")
                print(_summary(results, row_bytes))
            finally:
                if cluster is not None:
                    cluster.stop()
        except KeyboardInterrupt:
            print("\ninterrupted: shutting down", file=sys.stderr)
            return 130
        finally:
            if server is not None:
                server.stop()
    return 0


def _start_s3():
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint,
           "AWS_EC2_METADATA_DISABLED": "true"}
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                 aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket="warehouse")
    return {"endpoint": endpoint}, server, env


if __name__ == "__main__":
    sys.exit(main())
