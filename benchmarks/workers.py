"""Measured clients. Each runs in a fresh interpreter (common.run_worker):

    python -m benchmarks.workers NAME '{"arg": ...}'

and prints one JSON line with its measurements. Every epoch reader turns each
batch into torch tensors the same way (icefloe.torch.batch_to_tensors).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pyarrow.flight as flight

from benchmarks.measure import BatchCounter, measure, worker_main

# -- epoch sources: each yields dicts of tensors ------------------------------------


def _s3fs(endpoint: str):
    from pyarrow import fs

    host = endpoint.split("://", 1)[1]
    return fs.S3FileSystem(access_key="testing", secret_key="testing", region="us-east-1",
                           endpoint_override=host, scheme="http")


def _parquet(paths: list[str], batch_size: int, columns: list[str] | None,
             endpoint: str | None = None) -> Iterator[dict[str, Any]]:
    """pyarrow.dataset over Parquet files (local, or S3 when endpoint is given)."""
    import pyarrow.dataset as ds

    from icefloe.torch import batch_to_tensors

    filesystem = _s3fs(endpoint) if endpoint else None
    dataset = ds.dataset(paths, format="parquet", filesystem=filesystem)
    for batch in dataset.to_batches(columns=columns, batch_size=batch_size):
        if batch.num_rows:
            yield batch_to_tensors(batch)


def _icefloe(head: str, dataset: str, batch_size: int, shuffle: str, seed: int = 0,
             epoch: int = 0, loader: bool = True, share_memory: bool = True,
             **plan: Any) -> Iterator[dict[str, Any]]:
    """icefloe's PyTorch dataset, one process: through DataLoader(num_workers=0),
    or with ``loader=False`` iterated directly, as every other reader here is;
    ``share_memory=False``: over loopback TCP even where the nodes share
    their memory (as a reader on another machine would read)."""
    from torch.utils.data import DataLoader

    from icefloe.torch import CacheDataset

    ds = CacheDataset(head, dataset, batch_size=batch_size, shuffle=shuffle, seed=seed,
                      drop_last=False, client_options={"share_memory": share_memory}, **plan)
    ds.set_epoch(epoch)
    yield from DataLoader(ds, batch_size=None, num_workers=0) if loader else ds


def _pyflight(location: str) -> Iterator[dict[str, Any]]:
    """A plain pyarrow.flight server holding the table (benchmarks/pyflight_server.py)."""
    from icefloe.torch import batch_to_tensors

    client = flight.connect(location)
    reader = client.do_get(flight.Ticket(b"all"))
    for chunk in reader:
        yield batch_to_tensors(chunk.data)


def _kubeflow(head: str, batch_size: int) -> Iterator[dict[str, Any]]:
    """Kubeflow Trainer's data-cache usage: PATH [0, 1], one stream per endpoint,
    sequential, the server's 1024-row batches re-chunked to batch_size."""
    from torch.utils.data import DataLoader

    from icefloe.torch import DataCacheDataset

    yield from DataLoader(DataCacheDataset(head, batch_size=batch_size), batch_size=None,
                          num_workers=0)


def _window_order(num_rows: int, block_rows: int = 32, window_blocks: int = 128,
                  seed: int = 0) -> Any:
    """Row ids in the access pattern of the window shuffle (docs/epochs.md,
    1.1): windows of one ``block_rows`` block from each of ``window_blocks``
    strata, rows permuted within each window. Random rather than icefloe's
    keyed order: what a reader holding the table itself copies for one."""
    import numpy as np

    rng = np.random.default_rng(seed)
    blocks = -(-num_rows // block_rows)
    m = min(window_blocks, blocks)
    bounds = np.linspace(0, blocks, m + 1).astype(np.int64)  # the strata, in blocks
    k = int(np.diff(bounds).min())  # windows; a longer stratum's last block joins the last
    picks = bounds[:-1] + np.stack([rng.permutation(k) for _ in range(m)], axis=1)
    extra = np.concatenate([np.arange(bounds[s] + k, bounds[s + 1]) for s in range(m)])
    windows = [picks[w] for w in range(k - 1)] + [np.concatenate([picks[k - 1], extra])]
    offsets = np.arange(block_rows)
    index = np.int32 if num_rows < 2**31 else np.int64
    out = []
    for w in windows:
        rows = (w[:, None] * block_rows + offsets).ravel()
        out.append(rng.permutation(rows[rows < num_rows]).astype(index))
    return np.concatenate(out)


def _inprocess(paths: list[str], batch_size: int, columns: list[str] | None,
               order: str = "slices") -> Iterator[dict[str, Any]]:
    """The in-process limit: the same rows held as one pyarrow.Table in the training
    process (read and made contiguous before the clock), sliced into batch_size-row
    batches (zero copy) and turned into tensors; with ``order="window"``, each
    batch taken (copied) in the window shuffle's access pattern instead, the
    limit of a reader that shuffles so (the order made before the clock)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from icefloe.torch import batch_to_tensors

    table = pq.read_table(paths, columns=columns).combine_chunks()
    batch = table.to_batches()[0] if table.num_rows else None
    rows = _window_order(table.num_rows) if order == "window" else None

    def slices() -> Iterator[dict[str, Any]]:
        for start in range(0, table.num_rows, batch_size):
            if rows is None:
                yield batch_to_tensors(batch.slice(start, batch_size))
            else:
                ids = pa.array(rows[start:start + batch_size])
                yield batch_to_tensors(pc.take(batch, ids, boundscheck=False))

    return slices()


def _source(kind: str, a: dict[str, Any]) -> Iterator[dict[str, Any]]:
    # Imports happen here, before any clock starts (torch takes a second).
    import pyarrow.dataset  # noqa: F401
    import torch.utils.data  # noqa: F401

    import icefloe.torch  # noqa: F401

    if kind == "icefloe":
        plan = {k: a[k] for k in ("block_rows", "window_blocks", "prefetch")
                if a.get(k) is not None}
        return _icefloe(a["head"], a["dataset"], a["batch_size"], a.get("shuffle", "none"),
                        seed=a.get("seed", 0), epoch=a.get("epoch", 0),
                        loader=a.get("loader", True), share_memory=a.get("share_memory", True),
                        **plan)
    if kind == "parquet-s3":
        return _parquet(a["paths"], a["batch_size"], a.get("columns"), a["endpoint"])
    if kind == "parquet-local":
        return _parquet(a["paths"], a["batch_size"], a.get("columns"))
    if kind == "pyflight":
        return _pyflight(a["location"])
    if kind == "kubeflow":
        return _kubeflow(a["head"], a.get("kf_batch_size", 1024))
    if kind == "inprocess":
        return _inprocess(a["paths"], a["batch_size"], a.get("columns"),
                          a.get("order", "slices"))
    raise ValueError(kind)


def _barrier(path: str, parties: int, timeout_s: float = 120) -> None:
    """Waits until `parties` processes have reached this point: each leaves a file in
    directory `path` and polls for the others' (bounded by timeout_s)."""
    import os
    from pathlib import Path

    Path(path, str(os.getpid())).touch()
    deadline = time.monotonic() + timeout_s
    while len(os.listdir(path)) < parties:
        if time.monotonic() > deadline:
            raise TimeoutError(f"barrier {path}: {len(os.listdir(path))} of {parties} arrived")
        time.sleep(0.002)


def epoch(kind: str, max_batches: int | None = None, barrier: str | None = None,
          parties: int = 1, **a: Any) -> dict[str, Any]:
    """One whole epoch (or its first max_batches batches) into tensors: rows/s and
    GB/s of tensor bytes delivered. With `barrier`, the clock starts once `parties`
    workers have imported everything and are ready (concurrent consumers)."""
    source = _source(kind, a)
    if barrier is not None:
        _barrier(barrier, parties)
    return measure(source, max_batches)


def dataloader_floor(batch_size: int, columns: int, items: int = 20000,
                     rounds: int = 5) -> dict[str, Any]:
    """What ``DataLoader(batch_size=None, num_workers=0)`` itself costs per item:
    an IterableDataset yielding one prebuilt dict of ``columns`` float32
    tensors of ``batch_size`` rows (no data work at all), iterated through the
    DataLoader and directly; and what making a batch's ``columns`` tensor
    views costs. Median microseconds per item over ``rounds``."""
    import statistics

    import torch
    from torch.utils.data import DataLoader, IterableDataset

    item = {f"c{i}": torch.zeros(batch_size) for i in range(columns)}

    class Same(IterableDataset):
        def __iter__(self) -> Iterator[dict[str, Any]]:
            for _ in range(items):
                yield item

    def per_item(make: Any) -> float:
        times = []
        for _ in range(rounds):
            it = make()
            t0 = time.perf_counter()
            for _ in it:
                pass
            times.append((time.perf_counter() - t0) / items * 1e6)
        return statistics.median(times)

    def views() -> Iterator[None]:
        # What the cheapest source of such batches still does: cut each column
        # of a 64-batch chunk into views (icefloe.torch.batches_to_tensors).
        chunk = [torch.zeros(batch_size * 64) for _ in range(columns)]
        for _ in range(items // 64):
            sizes = [batch_size] * 64
            for _ in zip(*(c.split_with_sizes(sizes) for c in chunk), strict=True):
                yield None

    return {"dataloader_us": per_item(lambda: DataLoader(Same(), batch_size=None)),
            "direct_us": per_item(lambda: iter(Same())), "views_us": per_item(views),
            "columns": columns, "batch_size": batch_size}


def shuffle_quality(head: str, dataset: str, shuffle: str, rows: int, batch_size: int = 1024,
                    epoch: int = 0) -> dict[str, Any]:
    """How well an epoch mixes a table sorted by a label: a 10-class label that
    follows the rows' write order (label = id * 10 // rows; ids were written in
    order, each data file a run of them, so the table is sorted by it up to
    the order of its files). For each batch of the whole epoch, the
    total-variation distance between its label histogram and the table's;
    untimed."""
    import numpy as np
    from torch.utils.data import DataLoader

    from icefloe.torch import CacheDataset

    ds = CacheDataset(head, dataset, batch_size=batch_size, shuffle=shuffle, columns=["id"],
                      drop_last=True)
    ds.set_epoch(epoch)
    table = np.bincount(np.arange(rows, dtype=np.int64) * 10 // rows, minlength=10) / rows
    distances = []
    for batch in DataLoader(ds, batch_size=None):
        labels = batch["id"].numpy() * 10 // rows
        hist = np.bincount(labels, minlength=10) / len(labels)
        distances.append(0.5 * float(np.abs(hist - table).sum()))
    return {"shuffle": shuffle, "batch_size": batch_size, "batches": len(distances),
            "mean_distance": float(np.mean(distances)), "max_distance": float(np.max(distances))}


def stall(kind: str, step_s: float, max_steps: int, **a: Any) -> dict[str, Any]:
    """A training loop whose step takes step_s (a sleep: the accelerator computes
    while the CPU is free for the input pipeline): share of wall time spent
    waiting for the next batch."""
    it = _source(kind, a)
    wait = compute = first_wait = 0.0
    steps = 0
    t_start = time.perf_counter()
    while steps < max_steps:
        t0 = time.perf_counter()
        try:
            next(it)
        except StopIteration:
            break
        t1 = time.perf_counter()
        wait += t1 - t0
        if steps == 0:
            first_wait = t1 - t0
        deadline = t1 + step_s
        time.sleep(max(0.0, step_s - 0.0002))
        while time.perf_counter() < deadline:
            pass
        compute += time.perf_counter() - t1
        steps += 1
    wall = time.perf_counter() - t_start
    return {"steps": steps, "wall_s": wall, "wait_s": wait, "compute_s": compute,
            "first_wait_s": first_wait, "stall_share": wait / wall,
            "steady_stall_share": (wait - first_wait) / (wall - first_wait)}


def memory_path(rows: int, batch_size: int, batches: int = 200) -> dict[str, Any]:
    """The memory path's limits on this machine, one core: copying batches of the
    same columns (int64, int32, 16 float32) out of `rows` rows held in memory,
    sequential batches vs batches of uniformly random rows (numpy)."""
    import numpy as np

    rng = np.random.default_rng(0)
    cols = [np.arange(rows, dtype=np.int64), rng.integers(0, 10, rows, dtype=np.int32)]
    cols += [rng.standard_normal(rows, dtype=np.float32) for _ in range(16)]
    row_bytes = sum(c.itemsize for c in cols)
    batches = min(batches, rows // batch_size)
    t0 = time.perf_counter()
    for b in range(batches):
        for c in cols:
            c[b * batch_size:(b + 1) * batch_size].copy()
    seq = time.perf_counter() - t0
    idx = [rng.integers(0, rows, batch_size) for _ in range(batches)]
    t0 = time.perf_counter()
    for i in idx:
        for c in cols:
            c[i]
    rand = time.perf_counter() - t0
    nbytes = batches * batch_size * row_bytes
    return {"sequential_gbps": nbytes / seq / 1e9, "random_gbps": nbytes / rand / 1e9,
            "random_ns_per_row": rand / (batches * batch_size) * 1e9}


# -- wire ----------------------------------------------------------------------------


def wire(location: str, tickets: list[str], streams: int, repeat: int,
         shared_connection: bool = False) -> list[dict[str, Any]]:
    """`streams` parallel DoGet streams read into Arrow record batches (no conversion)."""
    options = [] if shared_connection else [("grpc.use_local_subchannel_pool", 1)]
    clients = [flight.FlightClient(location, generic_options=options) for _ in range(streams)]
    for c in clients:
        c.wait_for_available(timeout=10)
    out = []

    def read(i: int, counts: list[int], errors: list[BaseException]) -> None:
        try:
            reader = clients[i].do_get(flight.Ticket(bytes.fromhex(tickets[i % len(tickets)])))
            n = 0
            while True:
                try:
                    chunk = reader.read_chunk()
                except StopIteration:
                    break
                n += chunk.data.nbytes
            counts[i] = n
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)

    for _ in range(repeat):
        counts = [0] * streams
        errors: list[BaseException] = []
        threads = [threading.Thread(target=read, args=(i, counts, errors)) for i in range(streams)]
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        dt = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        if errors:
            raise errors[0]
        out.append({"streams": streams, "bytes": sum(counts), "seconds": dt,
                    "gbps": sum(counts) / dt / 1e9, "cpu_seconds": cpu})
    for c in clients:
        c.close()
    return out


# -- latency -------------------------------------------------------------------------


def first_batch(head: str, dataset: str, rows: int, batch_size: int, n: int) -> dict[str, Any]:
    """Warm cache: GetFlightInfo -> first record batch, in ms.

    `range`: a connected client asks for one batch-sized range and reads its first
    batch; `new_client`: the same with a new connection each time; `epoch`: the
    first batch of a sample-shuffled epoch plan (iter_epoch)."""
    from icefloe import Client

    def one_range(client: Client, i: int) -> float:
        start = (i * 7919 * batch_size) % max(1, rows - batch_size)
        t0 = time.perf_counter()
        info = client.flight_info(dataset, start, start + batch_size)
        ep = info.endpoints[0]
        reader = client.node(ep.locations[0].uri.decode()).do_get(
            ep.ticket, options=client.call_options())
        reader.read_chunk()
        dt = time.perf_counter() - t0
        reader.cancel()
        return dt * 1e3

    out: dict[str, list[float]] = {"range": [], "new_client": [], "epoch": []}
    with Client(head) as client:
        one_range(client, 0)  # connect to the head and the nodes once
        for i in range(n):
            out["range"].append(one_range(client, i + 1))
        for i in range(n):
            t0 = time.perf_counter()
            it = client.iter_epoch(dataset, batch_size=batch_size, shuffle="sample", seed=i)
            next(it)
            out["epoch"].append((time.perf_counter() - t0) * 1e3)
            it.close()
    for i in range(n):
        t0 = time.perf_counter()
        with Client(head) as fresh:
            one_range(fresh, i + 1)
        out["new_client"].append((time.perf_counter() - t0) * 1e3)
    return out


# -- random access ---------------------------------------------------------------------


def take_latency(kind: str, rows: int, sizes: list[int], calls: list[int], seed: int = 0,
                 head: str | None = None, dataset: str | None = None,
                 paths: list[str] | None = None,
                 share_memory: bool = True) -> dict[str, list[float]]:
    """Milliseconds of each call taking n uniformly random rows (any order,
    duplicates allowed): icefloe's Client.take (`icefloe`; ``share_memory=False``:
    over loopback TCP even where the nodes share their memory), or
    pyarrow.Table.take on the same rows held in this process (`inprocess`)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    if kind == "icefloe":
        from icefloe import Client

        client = Client(head, share_memory=share_memory)
        # Connect to the head and the nodes (map their files) before the clock.
        client.take(dataset, [0, rows - 1])

        def take(idx: np.ndarray) -> int:
            return client.take(dataset, idx).num_rows
    else:
        import pyarrow.parquet as pq

        table = pq.read_table(paths).combine_chunks()

        def take(idx: np.ndarray) -> int:
            return table.take(idx).num_rows
    out: dict[str, list[float]] = {}
    for n, k in zip(sizes, calls, strict=True):
        times = []
        for _ in range(k):
            idx = rng.integers(0, rows, n)
            t0 = time.perf_counter()
            got = take(idx)
            times.append((time.perf_counter() - t0) * 1e3)
            assert got == n, (got, n)
        out[str(n)] = times
    return out


# -- cold load baseline ---------------------------------------------------------------


def pyarrow_scan(paths: list[str], columns: list[str], label_below: int | None,
                 endpoint: str | None = None) -> dict[str, Any]:
    """pyarrow.dataset reading the files with the same projection and filter."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    filesystem = _s3fs(endpoint) if endpoint else None
    expr = pc.field("label") < label_below if label_below is not None else None
    times = []
    for _ in range(2):  # the second read runs in a warm process (threads, allocator)
        t0 = time.perf_counter()
        dataset = ds.dataset(paths, format="parquet", filesystem=filesystem)
        table = dataset.to_table(columns=columns, filter=expr)
        times.append(time.perf_counter() - t0)
        rows, nbytes = table.num_rows, table.nbytes
        del table
    return {"seconds": min(times), "first_seconds": times[0], "rows": rows, "bytes": nbytes}


# -- many readers ----------------------------------------------------------------------


def job(head: str, dataset: str, world_size: int, batch_size: int, shuffle: str, seed: int,
        start_at: float, ranks: list[int] | None = None) -> dict[str, Any]:
    """One training job of `world_size` ranks, emulated by reading each rank's plan
    (ranks run one after another, each to tensors), starting at wall time start_at."""
    from icefloe import Client
    from icefloe.torch import batch_to_tensors

    client = Client(head)
    client.describe(dataset)  # connect before the start line
    time.sleep(max(0.0, start_at - time.time()))
    t0 = time.time()
    count = BatchCounter()
    for rank in ranks if ranks is not None else range(world_size):
        for batch in client.iter_epoch(dataset, batch_size=batch_size, shuffle=shuffle,
                                       seed=seed, world_size=world_size, rank=rank,
                                       drop_last=False):
            count.add(batch_to_tensors(batch))
    t1 = time.time()
    client.close()
    return {"rows": count.rows, "bytes": count.bytes, "start": t0, "end": t1,
            "seconds": t1 - t0, "gbps": count.bytes / (t1 - t0) / 1e9}


def wait_nodes(head: str, n: int, timeout_s: float = 60) -> dict[str, Any]:
    from icefloe import Client

    deadline = time.monotonic() + timeout_s
    with Client(head) as client:
        while True:
            alive = [x for x in client.status()["nodes"] if x["state"] == "alive"]
            if len(alive) >= n:
                return {"nodes": [x["location"] for x in alive]}
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(alive)} of {n} nodes registered")
            time.sleep(0.1)


def load(head: str, name: str, source: str, filter: str | None = None,  # noqa: A002
         batch_size: int | None = None) -> dict[str, Any]:
    from icefloe import Client

    with Client(head) as client:
        t0 = time.perf_counter()
        desc = client.load(name, source, filter=filter, batch_rows=batch_size)
        dt = time.perf_counter() - t0
        desc.pop("schema", None)
        return {"seconds": dt, **json.loads(json.dumps(desc, default=str))}


if __name__ == "__main__":
    worker_main(globals())
