"""Epochs for distributed training: sharding, shuffling, resume, random access, PyTorch."""

from __future__ import annotations

import gc
import json
import threading
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
import torch
import torch.multiprocessing as mp
from ddp_util import as_rank
from iceberg_util import Warehouse
from resume_util import CONTEXT, assert_loader_resumes, run_then_resume, through_torch_save
from torch.utils.data import DataLoader, RandomSampler

import icefloe
from icefloe.torch import CacheDataset, CacheMapDataset, DataCacheDataset, batch_to_tensors

N = 1000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("epochs")
    wh = Warehouse(root / "wh")
    ids = np.arange(N, dtype=np.int64)
    rng = np.random.default_rng(0)
    data = pa.table({"id": ids, "x": rng.standard_normal(N).astype(np.float32),
                     "y": (ids % 2).astype(np.float32),
                     "name": pa.array([f"r{i}" for i in ids])})
    table = wh.create("t", data.slice(0, 250))
    for k in range(1, 4):
        table.append(data.slice(k * 250, 250))
    with icefloe.LocalCluster(num_nodes=2, log_dir=root / "logs",
                              head_args=["--default-dataset", "t"],
                              node_args=[["--default-dataset", "t"]] * 2) as c:
        with c.client() as client:
            client.load("t", table.metadata_location, batch_rows=50)
        yield c


@pytest.mark.parametrize("world_size", [2, 3])
def test_ddp_exactly_once_equal_steps_and_shuffles(cluster, tmp_path, world_size):
    configs = []
    for num_workers in (0, 1, 2):
        for drop_last in (True, False):
            configs.append({"num_workers": num_workers, "drop_last": drop_last,
                            "batch_size": 16, "shuffle": ("block", "window")[num_workers % 2],
                            "epochs": [0, 1, 0]})
    configs.append({"num_workers": 2, "drop_last": True, "batch_size": 10, "shuffle": "sample",
                    "epochs": [0, 1], "seed": 3})
    mp.start_processes(__import__("ddp_util").ddp_epochs, nprocs=world_size, join=True,
                       start_method="spawn",
                       args=(world_size, str(tmp_path / "init"), cluster.head_uri, "t",
                             str(tmp_path), configs))
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(world_size)]
    for c, cfg in enumerate(configs):
        step_rows = world_size * cfg["batch_size"]
        for e in range(len(cfg["epochs"])):
            per_rank = [ranks[r][c]["epochs"][e] for r in range(world_size)]
            assert len({len(b) for b in per_rank}) == 1, "unequal batch counts per rank"
            # Batch lengths per step are the same on every rank.
            assert len({tuple(len(b) for b in batches) for batches in per_rank}) == 1
            rows = Counter(i for batches in per_rank for b in batches for i in b)
            if cfg["drop_last"]:
                assert max(rows.values()) == 1
                assert sum(rows.values()) == (N // step_rows) * step_rows
            else:
                # DistributedSampler's rule: ceil(N / W) rows per rank, so at
                # most W - 1 rows are read twice in the whole job.
                assert set(rows) == set(range(N))
                assert sum(rows.values()) == world_size * -(-N // world_size)
                assert sum(v - 1 for v in rows.values()) <= world_size - 1
                assert max(rows.values()) <= 2
        orders = [[i for b in ranks[0][c]["epochs"][e] for i in b]
                  for e in range(len(cfg["epochs"]))]
        assert orders[0] != orders[1], "epochs must shuffle differently"
        if len(orders) == 3:
            assert orders[0] == orders[2], "the same seed and epoch must reproduce"


@pytest.mark.parametrize("new_world, new_batch, new_workers, shuffle",
                         [(2, 16, 0, "sample"), (3, 8, 2, "window")])
def test_resume_with_same_or_different_topology(cluster, new_world, new_batch, new_workers,
                                                shuffle):
    k = 7  # steps taken before the job stops (world 2, batch 16)
    first, per_rank, state = run_then_resume(
        lambda: CacheDataset(cluster.head_uri, "t", batch_size=16, shuffle=shuffle, seed=9),
        lambda: CacheDataset(cluster.head_uri, "t", batch_size=new_batch, shuffle=shuffle),
        k, 2, new_world, epoch=4, num_workers=new_workers, saved=True)
    assert (state["steps"], state["world_size"], state["batch_size"]) == (k, 2, 16)
    assert state["epoch"] == 4
    resumed = Counter(i for batches in per_rank for b in batches for i in b)
    assert len(first) == k * 32 and len(set(first)) == k * 32
    assert not set(first) & set(resumed), "a consumed row was read again"
    assert max(resumed.values()) == 1
    remaining = N - k * 2 * 16
    assert sum(resumed.values()) == remaining - remaining % (new_world * new_batch)


def test_stateful_dataloader_round_trip(cluster):
    from torchdata.stateful_dataloader import StatefulDataLoader

    def loader():
        ds = CacheDataset(cluster.head_uri, "t", batch_size=20, shuffle="block", seed=1)
        return StatefulDataLoader(ds, batch_size=None, num_workers=2,
                                  multiprocessing_context=CONTEXT)

    assert_loader_resumes(loader)


@pytest.mark.parametrize("shuffle", ["window", "none", "block", "sample"])
def test_evaluation_epoch_reads_every_row_exactly_once(cluster, shuffle):
    # One process, drop_last=False: 1000 rows in 15 batches of 64 and one of 40.
    ds = CacheDataset(cluster.head_uri, "t", batch_size=64, shuffle=shuffle, drop_last=False)
    batches = [b["id"].tolist() for b in DataLoader(ds, batch_size=None)]
    assert [len(b) for b in batches] == [64] * 15 + [40]
    assert sorted(i for b in batches for i in b) == list(range(N))
    assert len(ds) == 16


def test_checkpoint_after_the_last_step_resumes_to_the_next_epoch(cluster):
    def dataset():
        return CacheDataset(cluster.head_uri, "t", batch_size=64, drop_last=False, seed=2)

    ds = dataset()
    ds.set_epoch(3)
    steps = sum(1 for _ in DataLoader(ds, batch_size=None))
    assert steps == 16
    for state in (ds.state_dict(steps=steps), ds.state_dict()):
        resumed = dataset()
        resumed.load_state_dict(through_torch_save(state))
        resumed.set_epoch(3)  # the loop re-enters the saved epoch: nothing is left of it
        assert len(resumed) == 0
        assert list(DataLoader(resumed, batch_size=None)) == []
        resumed.set_epoch(4)  # and the next one starts from its beginning
        rows = [i for b in DataLoader(resumed, batch_size=None) for i in b["id"].tolist()]
        assert sorted(rows) == list(range(N))
        assert rows != [i for b in ds for i in b["id"].tolist()]  # epoch 3's order
    # A state that claims more steps than the epoch has is refused by the head.
    bad = ds.state_dict(steps=17)
    with pytest.raises(icefloe.InvalidArgument, match="resume_steps 17 is more than the 16"):
        dataset().load_state_dict(bad)


def test_stateful_dataloader_checkpoints_at_the_end_and_between_epochs(cluster):
    from torchdata.stateful_dataloader import StatefulDataLoader

    ds = CacheDataset(cluster.head_uri, "t", batch_size=64, drop_last=False, seed=4)
    loader = StatefulDataLoader(ds, batch_size=None, num_workers=2,
                                multiprocessing_context=CONTEXT)
    it = iter(loader)
    got = [next(it)["id"].tolist() for _ in range(16)]  # every batch, workers ran ahead
    assert sorted(i for b in got for i in b) == list(range(N))
    at_end = loader.state_dict()  # after the last step, before StopIteration
    assert next(it, None) is None
    between = loader.state_dict()  # the epoch ended
    del it
    for state in (at_end, between):
        ds2 = CacheDataset(cluster.head_uri, "t", batch_size=64, drop_last=False, seed=4)
        resumed = StatefulDataLoader(ds2, batch_size=None, num_workers=2,
                                     multiprocessing_context=CONTEXT)
        resumed.load_state_dict(state)
        if state is at_end:
            assert list(resumed) == []  # the workers' states: nothing is left of epoch 0
        # After the epoch ended, torchdata starts the next iteration afresh:
        # the loop sets the next epoch first, as it does anyway.
        ds2.set_epoch(1)
        rows = [i for b in resumed for i in b["id"].tolist()]
        assert sorted(rows) == list(range(N))


def test_worker_state_refuses_another_topology(cluster):
    from torchdata.stateful_dataloader import StatefulDataLoader

    def loader(world_size):
        with as_rank(0, world_size):
            ds = CacheDataset(cluster.head_uri, "t", batch_size=20, seed=1)
            return StatefulDataLoader(ds, batch_size=None, num_workers=2,
                                      multiprocessing_context=CONTEXT)

    first = loader(1)
    it = iter(first)
    for _ in range(3):
        next(it)
    state = first.state_dict()
    del it
    other = loader(2)
    other.load_state_dict(state)
    with as_rank(0, 2), pytest.raises(ValueError, match="resumes the same topology only"):
        list(other)


def test_two_jobs_share_one_cached_copy(cluster):
    results = {}

    def job(name, world, shuffle, batch):
        rows = Counter()
        for r in range(world):
            with cluster.client() as client:
                for b in client.iter_epoch("t", batch_size=batch, shuffle=shuffle, seed=5,
                                           world_size=world, rank=r):
                    rows.update(b.column("id").to_pylist())
        results[name] = rows

    threads = [threading.Thread(target=job, args=("a", 2, "sample", 25)),
               threading.Thread(target=job, args=("b", 3, "none", 8))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sum(results["a"].values()) == 1000 and max(results["a"].values()) == 1
    assert sum(results["b"].values()) == 984 and max(results["b"].values()) == 1


def test_training_loop_with_persistent_workers(cluster):
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ds = CacheDataset(cluster.head_uri, "t", batch_size=32, shuffle="block", columns=["x", "y"])
    loader = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True,
                        pin_memory=False, multiprocessing_context=CONTEXT)
    steps = 0
    for epoch in range(2):
        ds.set_epoch(epoch)
        for batch in loader:
            loss = torch.nn.functional.mse_loss(model(batch["x"][:, None]).squeeze(1), batch["y"])
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
    assert steps == 2 * (N // 32)


def test_persistent_workers_see_set_epoch_and_resume(cluster):
    # Workers that live across epochs hold their own copy of the dataset:
    # set_epoch and load_state_dict in the main process must still reach them.
    ds = CacheDataset(cluster.head_uri, "t", batch_size=25, seed=8, drop_last=False)
    loader = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True,
                        multiprocessing_context=CONTEXT)
    orders = []
    for e in range(3):
        ds.set_epoch(e)
        orders.append([i for b in loader for i in b["id"].tolist()])
        assert sorted(orders[-1]) == list(range(N))
    assert orders[0] != orders[1] and orders[1] != orders[2]
    ds.set_epoch(0)
    assert [i for b in loader for i in b["id"].tolist()] == orders[0]
    # A resume state loaded in the main process: the rest of epoch 1.
    state = {**ds.state_dict(steps=0), "epoch": 1, "steps": 10}
    ds.load_state_dict(state)
    rest = [i for b in loader for i in b["id"].tolist()]
    assert rest == orders[1][10 * 25:]


def test_float_column_is_zero_copy(cluster):
    with cluster.client() as client:
        batch = next(client.iter_epoch("t", batch_size=50, shuffle="none"))
    tensors = batch_to_tensors(batch)
    col = batch.column(batch.schema.get_field_index("x"))
    assert tensors["x"].dtype == torch.float32
    assert tensors["x"].data_ptr() == col.buffers()[1].address + col.offset * 4
    assert tensors["name"][0].startswith("r")


def test_random_access_and_map_dataset(cluster):
    with cluster.client() as client:
        whole = client.read("t")
        ids = [999, 3, 3, 512, 0]
        got = client.take("t", ids)
        assert got.column("id").to_pylist() == [whole.column("id")[i].as_py() for i in ids]
        with pytest.raises(icefloe.InvalidArgument, match="outside"):
            client.take("t", [N])
    ds = CacheMapDataset(cluster.head_uri, "t", columns=["id"], batched=True)
    assert len(ds) == N
    seen = []
    for batch in DataLoader(ds, batch_size=64, sampler=RandomSampler(ds),
                            collate_fn=lambda b: b):
        seen += batch["id"].tolist()
    assert sorted(seen) == list(range(N))
    assert CacheMapDataset(cluster.head_uri, "t")[5]["id"] == whole.column("id")[5].as_py()


class Ids(DataCacheDataset):
    """The Kubeflow example's override point, used as users do."""

    def from_arrow_rb_to_tensor(self, chunk):
        yield torch.from_numpy(chunk.column("id").to_numpy())


def test_kubeflow_style_dataset_reads_everything(cluster):
    seen = []
    for chunk in DataLoader(Ids(cluster.head_uri, batch_size=128), batch_size=None,
                            num_workers=2, multiprocessing_context=CONTEXT):
        assert len(chunk) <= 128
        seen += chunk.tolist()
    assert sorted(seen) == list(range(N))


def test_kubeflow_style_dataset_errors_are_icefloe_errors(cluster):
    # Through Client: a bad shard is the head's InvalidArgument, not a raw
    # pyarrow error; a head that is gone is Unavailable.
    with cluster.client() as client, pytest.raises(icefloe.InvalidArgument, match="range"):
        client.kubeflow_shard(5, 2)
    with pytest.raises(icefloe.Unavailable):
        list(Ids("grpc://127.0.0.1:1", batch_size=128))


def _collect_garbage(_worker: int) -> None:
    gc.collect()


def test_forked_worker_fails_clearly_instead_of_hanging(cluster):
    ds = CacheDataset(cluster.head_uri, "t", batch_size=10)
    with cluster.client():
        pass  # this process has used Flight now
    # Garbage that holds Flight clients and streams, as an exception's frames
    # do: collected in a forked child, it used to hang the child (gRPC has no
    # threads there). The worker collects it first thing.
    gc.disable()  # until the fork: the parent must not collect it first
    try:
        client = cluster.client()
        stream = client.iter_epoch("t", batch_size=10, prefetch=0)
        next(stream)
        cycle = [client, stream]
        cycle.append(cycle)
        del client, stream, cycle
        loader = DataLoader(ds, batch_size=None, num_workers=1, multiprocessing_context="fork",
                            worker_init_fn=_collect_garbage, timeout=30)
        with pytest.raises(Exception, match="forked after its parent used Arrow Flight"):
            list(loader)
    finally:
        gc.enable()


def test_bad_plans_are_clear_errors(cluster):
    with cluster.client() as client:
        with pytest.raises(icefloe.InvalidArgument, match="rank"):
            list(client.iter_epoch("t", batch_size=4, world_size=2, rank=2))
        with pytest.raises(icefloe.InvalidArgument, match="shuffle"):
            list(client.iter_epoch("t", batch_size=4, shuffle="zigzag"))
        with pytest.raises(icefloe.InvalidArgument, match="window_blocks"):
            list(client.iter_epoch("t", batch_size=4, window_blocks=70000))
        with pytest.raises(icefloe.InvalidArgument, match="order version 1"):
            client.epoch_info("t", batch_size=4, order_version=1)
        with pytest.raises(icefloe.NotFound):
            list(client.iter_epoch("nope", batch_size=4))


class CallerThreadTensors(CacheDataset):
    """An override of to_tensors records the thread it runs on."""

    threads: set[str] = set()

    def to_tensors(self, batch):
        CallerThreadTensors.threads.add(threading.current_thread().name)
        return batch_to_tensors(batch)


def _assembly_threads() -> int:
    return sum(t.name == "icefloe-assemble" for t in threading.enumerate())


def test_background_assembly_matches_the_caller_thread_and_stops_early(cluster):
    with cluster.client() as client:
        plan = {"batch_size": 40, "shuffle": "sample", "seed": 3, "epoch": 1}
        inline = [b.column("id").to_pylist() for b in client.iter_epoch("t", prefetch=0, **plan)]
        ahead = [b.column("id").to_pylist() for b in client.iter_epoch("t", prefetch=3, **plan)]
        assert ahead == inline
        assert sorted(i for b in inline for i in b) == list(range(N))
        as_np = next(client.iter_epoch("t", as_numpy=True, **plan))
        assert as_np["id"].tolist() == inline[0]
        # Leaving an epoch early stops its assembly thread before close returns.
        epoch = client.iter_epoch("t", prefetch=2, **plan)
        next(epoch)
        assert _assembly_threads() >= 1
        epoch.close()
        assert _assembly_threads() == 0
    # The default conversion runs in the background; an override on the loop's thread.
    CallerThreadTensors.threads.clear()
    ds = CallerThreadTensors(cluster.head_uri, "t", batch_size=100, shuffle="block")
    got = [t["id"] for t in DataLoader(ds, batch_size=None)]
    assert sorted(torch.cat(got).tolist()) == list(range(N))
    assert CallerThreadTensors.threads == {threading.current_thread().name}


def test_malformed_pieces_are_rejected():
    from piece_util import encode, merged

    data = pa.record_batch({"id": pa.array([1, 2], pa.int64())})

    def runs(positions):  # runs of one row each
        return data, encode(0, 4, runs=[(p, 1) for p in positions])

    def scattered(positions):  # one position per row, as window and sample pieces come
        return data, encode(0, 4, positions=positions)

    for piece in (runs, scattered):
        ok = merged(piece([3, 0]), piece([1, 2]))
        assert ok.column("id").to_pylist() == [2, 1, 2, 1]
        with pytest.raises(icefloe.InvalidArgument, match="two pieces for one position"):
            merged(piece([0, 1]), piece([1, 3]))
        with pytest.raises(icefloe.InvalidArgument, match="outside"):
            merged(piece([0, 1]), piece([3, 4]))
        with pytest.raises(icefloe.InvalidArgument, match="do not match"):
            merged(piece([0, 1]), (data, encode(0, 4, positions=[2])))
    with pytest.raises(icefloe.InvalidArgument, match="do not match"):
        merged(runs([0, 1, 2]))
    # One piece of positions 0..n-1 (a take from one node) is the batch as sent.
    assert merged((data, encode(0, 2, positions=[0, 1]))) is data
    swapped = merged((data, encode(0, 2, positions=[1, 0])))
    assert swapped.column("id").to_pylist() == [2, 1]
    four = pa.record_batch({"id": pa.array([10, 11, 12, 13], pa.int64())})
    one = four.slice(0, 1)
    assert merged((one, encode(0, 1, positions=[0]))) is one
    assert merged((four, encode(0, 4, positions=[0, 1, 2, 3]))) is four
    # First and last in place, the middle not: still put in order.
    inner = merged((four, encode(0, 4, positions=[0, 2, 1, 3])))
    assert inner.column("id").to_pylist() == [10, 12, 11, 13]
