"""The quick-start demo: train a PyTorch model from an icefloe cache, and
the same training loop reading the table's Parquet files, side by side.

By default (the main job, issue 27): a small transformer fine-tuned on a
review table in S3, the baseline tokenizing Parquet text in DataLoader
workers every epoch, icefloe reading token ids its nodes made once, at load
(icefloe_demo.text says how). ``--numeric`` runs the earlier demo over a
numeric table, described here:

1. Writes an Iceberg table with pyiceberg (SQL catalog on sqlite) into a
   loopback S3 server (moto), as a table in object storage would be
   (``--local``: a local warehouse, no S3).
2. Starts a local cluster (a head and ``--nodes`` data nodes) and loads the
   table with a projection and a filter (or uses a running cluster: ``--head``,
   which implies ``--local`` so that the cluster can read the table).
3. Runs one training loop (``--ranks`` DDP ranks, a small MLP; on a GPU with
   ``--device cuda``, the default where there is one, else gloo on CPU)
   for ``--epochs`` epochs over each source:
   a. Parquet from S3: pyarrow.dataset over the table's files in S3;
   b. Parquet from local disk: the same files downloaded to a local directory;
   c. icefloe: CacheDataset streaming from the cache's data nodes.
   Each source gets the DataLoader setup a competent user would pick for it:
   Parquet decodes in ``--workers`` DataLoader workers so that decoding
   overlaps the step; CacheDataset assembles on a background thread of the
   training process and needs no workers.
4. Prints, per source and epoch, rows, MB/s (the Arrow bytes of the columns
   read), rows/s and the share of step time spent waiting for data; the first
   epoch is a warm-up (process start, connections, worker start-up) and is
   left out of the comparison.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import multiprocessing.util
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


def demo_catalog(root: Path, s3: dict | None):
    """The demos' pyiceberg SQL catalog (namespace "demo"): its warehouse in
    the loopback S3 server's bucket, or under ``root`` without S3."""
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
    return catalog


def write_table(root: Path, size_mb: int, files: int, s3: dict | None, seed: int = 0):
    catalog = demo_catalog(root, s3)
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


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="where the model steps: cuda when a GPU is there (auto), else cpu")


def resolve_device(parser: argparse.ArgumentParser, name: str) -> str:
    """``auto`` becomes cuda where torch sees a GPU, else cpu; cuda without one is an error."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")
    return name


def init_rank(rank: int, world: int, init: str, device: str) -> torch.device:
    """Joins the DDP group and returns this rank's device: on cuda, GPU
    ``rank % count`` and NCCL (gloo when ranks share a GPU, which NCCL refuses);
    on cpu, gloo and one intra-op thread per rank (the ranks share the cores)."""
    import torch.distributed as dist

    group = {"init_method": f"file://{init}", "rank": rank, "world_size": world}
    if device == "cuda":
        count = torch.cuda.device_count()
        where = torch.device("cuda", rank % count)
        torch.cuda.set_device(where)
        if world <= count:
            dist.init_process_group("nccl", device_id=where, **group)
        else:
            dist.init_process_group("gloo", **group)
    else:
        torch.set_num_threads(1)
        where = torch.device("cpu")
        dist.init_process_group("gloo", **group)
    torch.manual_seed(0)
    return where


def encoder_layers(dim: int, heads: int, layers: int) -> torch.nn.TransformerEncoder:
    """The text demos' small transformer body: ``layers`` pre-norm layers of
    width ``dim``, ``heads`` heads, a feed-forward of ``2 * dim``, no dropout."""
    layer = torch.nn.TransformerEncoderLayer(dim, heads, dim_feedforward=2 * dim,
                                             dropout=0.0, batch_first=True, norm_first=True)
    return torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


def on_device(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """The batch's tensors on ``device`` (part of the step's time, as in a real loop)."""
    if device.type == "cpu":
        return batch
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def device_text(args: argparse.Namespace) -> str:
    if args.device == "cuda":
        return f"CUDA ({torch.cuda.get_device_name(0)})"
    return "CPU, 1 thread each"


def _train_rank(rank: int, world: int, init: str, source: dict, args: dict, out: str) -> None:
    import torch.distributed as dist
    from torch.distributed.algorithms.join import Join

    device = init_rank(rank, world, init, args["device"])
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(len(FEATURES), 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def step(batch: dict[str, Any]) -> float:
        batch = on_device(batch, device)
        x = torch.stack([batch[f] for f in FEATURES], dim=1)
        loss = torch.nn.functional.cross_entropy(model(x), batch["label"].long())
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    # The Arrow bytes of the columns read: fixed-width and without nulls here,
    # so each tensor holds exactly its column's buffer.
    count = {"rows": lambda b: len(b["label"]),
             "bytes": lambda b: sum(b[c].nbytes for c in COLUMNS)}

    dataset = _make_dataset(source, args)
    loader = _loader(dataset, source["workers"])
    epochs = []
    for epoch in range(args["epochs"]):
        dataset.set_epoch(epoch)
        # Join: the Parquet baseline gives ranks unequal batch counts (icefloe
        # never does), which would otherwise hang DDP at the end of the epoch.
        with Join([model]):
            epochs.append(_epoch(loader, step, count, f"{source['kind']} epoch {epoch}", rank))
    dist.barrier()
    Path(out, f"{source['kind']}-rank{rank}.json").write_text(json.dumps(epochs))
    dist.destroy_process_group()
    _leave_rank(loader)


def _loader(dataset: Any, workers: int) -> Any:
    """The DataLoader of a demo source: its batches come whole from the
    dataset, in ``workers`` persistent worker processes (0: in this one)."""
    from torch.utils.data import DataLoader

    return DataLoader(dataset, batch_size=None, num_workers=workers,
                      multiprocessing_context="forkserver" if workers else None,
                      persistent_workers=bool(workers))


def _epoch(loader: Any, step: Any, count: dict[str, Any], desc: str,
           rank: int, max_steps: int | None = None) -> dict[str, Any]:
    """One timed pass over ``loader`` (its first ``max_steps`` batches, where
    given): ``step(batch)`` trains and returns the loss (None: no model);
    ``count`` maps each figure to sum (rows, bytes, tokens) to its value for
    a batch. ``wait`` is time spent waiting for batches, ``compute`` the rest."""
    sums = dict.fromkeys(count, 0)
    steps = 0
    wait = compute = loss_sum = 0.0
    bar = _bar(desc=desc, unit="step", leave=False) if rank == 0 else None
    start = tick = time.perf_counter()
    for batch in loader:
        got = time.perf_counter()
        wait += got - tick
        if step is not None:
            loss_sum += step(batch)
        for figure, of in count.items():
            sums[figure] += of(batch)
        steps += 1
        tick = time.perf_counter()
        compute += tick - got
        if bar is not None:
            bar.update(1)
        if steps == max_steps:
            break
    if bar is not None:
        bar.close()
    return {**sums, "steps": steps, "seconds": time.perf_counter() - start, "wait": wait,
            "compute": compute,
            "loss": loss_sum / max(steps, 1) if step is not None else float("nan")}


def train_and_report(dataset: Any, model: Any, step: Any, count: dict[str, Any], source: dict,
                     rank: int, epochs: int, out: str, max_steps: int | None = None) -> None:
    """A text demo rank's loop over one source: ``epochs`` training epochs
    (each its first ``max_steps`` batches, where given), then one epoch
    without the model (how fast the source alone delivers: what a loop whose
    step is much faster, on an accelerator, could take); the figures written
    to ``out/<kind>-rank<rank>.json``; then the rank ends."""
    import torch.distributed as dist
    from torch.distributed.algorithms.join import Join

    loader = _loader(dataset, source["workers"])
    trained = []
    for epoch in range(epochs):
        dataset.set_epoch(epoch)
        with Join([model]):  # the baseline gives ranks unequal batch counts
            trained.append(_epoch(loader, step, count, f"{source['kind']} epoch {epoch}", rank,
                                  max_steps))
    dataset.set_epoch(epochs)
    alone = _epoch(loader, None, count, f"{source['kind']} input alone", rank)
    dist.barrier()
    Path(out, f"{source['kind']}-rank{rank}.json").write_text(
        json.dumps({"epochs": trained, "alone": alone}))
    dist.destroy_process_group()
    _leave_rank(loader)


def _leave_rank(loader: Any) -> None:
    """Ends a rank's process: DataLoader workers stopped, then os._exit (gRPC
    threads need no teardown, and waiting for them can hang)."""
    # Persistent DataLoader workers are children of the forkserver, not of
    # this process, and would outlive it: stop them before leaving.
    del loader
    gc.collect()
    # os._exit skips multiprocessing's exit handler, which unlinks the named
    # semaphores this process made (the DataLoader's queues and events) and
    # tells the resource tracker (the parent's, shared through spawn) so;
    # without it the tracker finds them at the end and warns of "leaked
    # semaphore objects". Run it first.
    multiprocessing.util._exit_function()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _make_dataset(source: dict, args: dict):
    if source["kind"] == "icefloe":
        from icefloe.torch import CacheDataset

        return CacheDataset(source["head"], source["dataset"], batch_size=args["batch_size"],
                            shuffle="block", seed=0, drop_last=True, columns=COLUMNS)
    return ParquetDataset(source["files"], args["batch_size"], source.get("s3"))


class ParquetDataset(IterableDataset):
    """The baseline: each epoch reads the table's Parquet files with pyarrow
    (projection and filter pushed down), files split across ranks x workers,
    in a per-epoch shuffled file order, re-cut to full batches."""

    def __init__(self, files: list[str], batch_size: int, s3: dict | None) -> None:
        self.files, self.batch_size, self.s3 = files, batch_size, s3
        # Persistent DataLoader workers hold their own copy of the dataset and
        # never see set_epoch: each copy counts the epochs it has read.
        self.epoch = 0
        self.rank, self.world = 0, 1
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            self.rank, self.world = torch.distributed.get_rank(), torch.distributed.get_world_size()

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        import pyarrow.compute as pc

        from icefloe.torch import batch_to_tensors

        for batch in self._batches(COLUMNS, pc.field("label") < 9):
            yield batch_to_tensors(batch)

    def _batches(self, columns: list[str], row_filter: Any = None):
        """This rank's and worker's files of the next epoch (a per-epoch
        shuffled file order), read with ``columns`` and ``row_filter`` pushed
        down and re-cut to full batches, as a user would."""
        import pyarrow.dataset as ds
        import pyarrow.fs

        epoch = self.epoch
        self.epoch += 1
        info = get_worker_info()
        k, w = (info.num_workers, info.id) if info else (1, 0)
        order = np.random.default_rng(epoch).permutation(len(self.files))
        mine = [self.files[i] for i in order[self.rank * k + w::self.world * k]]
        if not mine:
            return
        fs = None
        if self.s3:
            fs = pyarrow.fs.S3FileSystem(endpoint_override=self.s3["endpoint"], scheme="http",
                                         access_key="testing", secret_key="testing",
                                         region="us-east-1")
        scanner = ds.dataset(mine, format="parquet", filesystem=fs).scanner(
            columns=columns, filter=row_filter, batch_size=self.batch_size)
        pending: list[pa.RecordBatch] = []
        rows = 0
        for b in scanner.to_batches():
            pending.append(b)
            rows += b.num_rows
            while rows >= self.batch_size:
                merged = pa.Table.from_batches(pending).combine_chunks().to_batches()[0]
                yield merged.slice(0, self.batch_size)
                rest = merged.slice(self.batch_size)
                pending, rows = [rest], rest.num_rows


def run_ranks(target: Any, kind: str, source: dict, ranks: int, out: Path,
              args: dict) -> list[list[dict]]:
    """Runs ``target(rank, world, init, source, args, out)`` in ``ranks``
    spawned processes; returns each rank's per-epoch records
    (``<out>/<kind>-rank<r>.json``)."""
    import torch.multiprocessing as mp

    source = {**source, "kind": kind}
    init = out / f"{kind}.init"
    mp.start_processes(target, nprocs=ranks, join=True, start_method="spawn",
                       args=(ranks, str(init), source, args, str(out)))
    return [json.loads((out / f"{kind}-rank{r}.json").read_text()) for r in range(ranks)]


def train(kind: str, source: dict, args: argparse.Namespace, out: Path) -> list[dict]:
    """Runs the training loop over one source; per epoch, all ranks together."""
    per_rank = run_ranks(_train_rank, kind, source, args.ranks, out,
                         {"epochs": args.epochs, "batch_size": args.batch_size,
                          "device": args.device})
    return [{"rows": sum(r[e]["rows"] for r in per_rank),
             "bytes": sum(r[e]["bytes"] for r in per_rank),
             "seconds": max(r[e]["seconds"] for r in per_rank),
             "wait": sum(r[e]["wait"] for r in per_rank),
             "busy": sum(r[e]["wait"] + r[e]["compute"] for r in per_rank),
             "loss": per_rank[0][e]["loss"]}
            for e in range(args.epochs)]


# -- main ------------------------------------------------------------------

LABELS = {"parquet-s3": "Parquet from S3", "parquet-local": "Parquet on local disk",
          "icefloe": "icefloe"}


def _parquet_files(table) -> list[str]:
    files = [t.file.file_path for t in table.scan().plan_files()]
    return [f.split("://", 1)[1] if f.startswith(("file://", "s3://")) else f for f in files]


def _download(files: list[str], s3: dict, dest: Path) -> list[str]:
    """Copies the table's data files from S3 to local disk (bucket/key -> dest/key)."""
    import boto3

    client = boto3.client("s3", endpoint_url=s3["endpoint"], region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    local = []
    for f in files:
        bucket, key = f.split("/", 1)
        path = dest / key
        path.parent.mkdir(parents=True, exist_ok=True)
        client.download_file(bucket, key, str(path))
        local.append(str(path))
    return local


def _steady(epochs: list[dict]) -> dict:
    """The epochs after the warm-up (all of them when there is only one)."""
    steady = epochs[1:] or epochs
    total = {k: sum(e[k] for e in steady) for k in ("rows", "bytes", "seconds", "wait", "busy")}
    return {**total, "loss": steady[-1]["loss"]}


def _row(kind: str, epoch: str, r: dict) -> str:
    seconds = max(r["seconds"], 1e-9)
    return (f"{kind:<14} {epoch:>7} {r['rows']:>11,} {r['seconds']:>8.2f} "
            f"{r['bytes'] / 1e6 / seconds:>8,.2f} {r['rows'] / seconds:>11,.0f} "
            f"{r['wait'] / max(r['busy'], 1e-9):>7.1%} {r['loss']:>6.3f}")


def _summary(results: dict[str, list[dict]]) -> str:
    """One line per source and epoch, one per source for the steady epochs,
    then icefloe's speed-up over each baseline."""
    lines = [f"{'source':<14} {'epoch':>7} {'rows':>11} {'seconds':>8} {'MB/s':>8} "
             f"{'rows/s':>11} {'waiting':>8} {'loss':>6}"]
    for kind, epochs in results.items():
        for e, r in enumerate(epochs):
            lines.append(_row(kind, "warm-up" if e == 0 and len(epochs) > 1 else str(e), r))
    steady = {kind: _steady(epochs) for kind, epochs in results.items()}
    n = max(len(e) for e in results.values())
    which = (f"epochs 1-{n - 1}, after the warm-up" if n > 2 else
             "epoch 1, after the warm-up" if n == 2 else "epoch 0, warm-up included")
    lines.append(f"\nsteady state ({which}):")
    lines.extend(_row(kind, "steady", r) for kind, r in steady.items())
    if "icefloe" in steady:
        rate = {k: r["bytes"] / max(r["seconds"], 1e-9) for k, r in steady.items()}
        for kind in (k for k in steady if k != "icefloe"):
            lines.append(f"icefloe: {rate['icefloe'] / max(rate[kind], 1e-9):.2f}x the MB/s of "
                         f"{LABELS[kind]}")
    return "\n".join(lines)


def _setup(sources: dict[str, dict], args: argparse.Namespace) -> str:
    lines = [f"training: {args.ranks} DDP rank(s) ({device_text(args)}), MLP 16-64-10, "
             f"batch {args.batch_size}, {args.epochs} epochs (the first a warm-up)"]
    for kind, s in sources.items():
        if kind == "icefloe":
            how = (f"CacheDataset from {s['nodes']} data node(s), block shuffle, "
                   f"{s['workers']} DataLoader workers"
                   + (" (assembles on a background thread, 2 batches ahead)"
                      if not s["workers"] else ""))
        else:
            where = "in S3 (moto on loopback)" if s.get("s3") else "on local disk"
            how = (f"pyarrow.dataset over {len(s['files'])} files {where}, projection and "
                   f"filter pushed down, shuffled file order, {s['workers']} DataLoader "
                   f"workers per rank")
        lines.append(f"  {kind:<14} {how}")
    return "\n".join(lines)


def main_numeric(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="icefloe_demo --numeric", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=200, help="table size to generate")
    parser.add_argument("--files", type=int, default=8, help="data files in the table")
    parser.add_argument("--nodes", type=int, default=2, help="data nodes of the local cluster")
    parser.add_argument("--ranks", type=int, default=1, help="DDP ranks")
    parser.add_argument("--workers", type=int, default=2,
                        help="DataLoader workers per rank reading Parquet")
    parser.add_argument("--cache-workers", type=int, default=0,
                        help="DataLoader workers per rank reading icefloe")
    parser.add_argument("--epochs", type=int, default=3, help="epochs per source (first: warm-up)")
    parser.add_argument("--batch-size", type=int, default=4096)
    parser.add_argument("--local", action="store_true",
                        help="write the table to local disk (no S3 server, no S3 baseline)")
    parser.add_argument("--s3", action="store_true", help=argparse.SUPPRESS)  # the default now
    parser.add_argument("--head", help="use a running cluster at this location (implies --local)")
    parser.add_argument("--skip-parquet", action="store_true", help="skip the Parquet baselines")
    add_device_argument(parser)
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.ranks < 1:
        parser.error("--epochs and --ranks must be at least 1")
    args.device = resolve_device(parser, args.device)
    local = args.local or bool(args.head)


    with tempfile.TemporaryDirectory(prefix="icefloe-demo-") as tmp, demo_s3(local) as (s3, env):
        root = Path(tmp)
        try:
            table, rows = write_table(root, args.size_mb, args.files, s3)
            print(f"table: {rows:,} rows in {args.files} files at {table.metadata_location}")
            sources: dict[str, dict] = {}
            if not args.skip_parquet:
                files = _parquet_files(table)
                if s3:
                    sources["parquet-s3"] = {"files": files, "s3": s3, "workers": args.workers}
                    files = _download(files, s3, root / "local")
                    print(f"downloaded the {len(files)} data files to {root / 'local'}")
                sources["parquet-local"] = {"files": files, "workers": args.workers}
            with demo_head(args, env, root) as head:
                from icefloe import Client

                with Client(head) as client, _bar(desc="loading into the cache",
                                                  unit="file") as bar:
                    def progress(p: dict) -> None:
                        bar.total = p.get("tasks_total", 0)
                        bar.n = min(p.get("tasks_done", 0), bar.total or 0)
                        bar.refresh()

                    desc = client.load("demo", table.metadata_location, columns=COLUMNS,
                                       filter=FILTER, batch_rows=args.batch_size,
                                       progress=progress)
                print(f"loaded 'demo' ({len(COLUMNS)} of 19 columns where {FILTER}): "
                      f"{desc['rows']:,} rows, {desc['bytes'] / 1e6:,.0f} MB in RAM, "
                      f"{desc['load_seconds']:.2f}s")
                sources["icefloe"] = {"head": head, "dataset": "demo",
                                      "workers": args.cache_workers,
                                      "nodes": "the running cluster's" if args.head
                                      else args.nodes}
                print(_setup(sources, args))
                results = {kind: train(kind, source, args, root)
                           for kind, source in sources.items()}
                print()
                print(_summary(results))
        except KeyboardInterrupt:
            print("\ninterrupted: shutting down", file=sys.stderr)
            return 130
    return 0


@contextlib.contextmanager
def demo_s3(local: bool):
    """The loopback S3 server (moto) and the environment that reaches it,
    exported to this process; (None, {}) when ``local``. Stopped on exit."""
    if local:
        yield None, {}
        return
    s3, server, env = _start_s3()
    os.environ.update(env)
    try:
        yield s3, env
    finally:
        server.stop()


@contextlib.contextmanager
def demo_head(args: argparse.Namespace, env: dict[str, str], root: Path):
    """The head to use: ``--head``'s, or a LocalCluster of ``--nodes`` data
    nodes started here (with ``env``, logs under ``root``) and stopped on exit."""
    if args.head:
        yield args.head
        return
    from icefloe import LocalCluster

    cluster = LocalCluster(num_nodes=args.nodes, memory_limit="4GiB", env=env,
                           log_dir=root / "logs").start()
    print(f"cluster: head {cluster.head_uri}, {args.nodes} data node(s)")
    try:
        yield cluster.head_uri
    finally:
        cluster.stop()


def _start_s3():
    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request
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

