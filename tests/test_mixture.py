"""Weighted mixtures of cached datasets: proportions per window of batches,
every source's rows once per its own epoch, sharding over ranks x workers,
determinism, resume with another world size, and bad input (issue 46)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from itertools import islice

import numpy as np
import pyarrow as pa
import pytest
from ddp_util import as_rank
from iceberg_util import Warehouse
from resume_util import CONTEXT, assert_loader_resumes, batch_ids, run_then_resume
from torch.utils.data import DataLoader

import icefloe
from icefloe._mixture import Position, Runs, Source, Straddle, apportion, pattern_of
from icefloe.errors import InvalidArgument, NotFound
from icefloe.torch import CacheDataset, Mixture

# rows, first id, token lengths (low, high): ids tell the source apart.
SOURCES = {"web": (1200, 0, (4, 9)), "code": (600, 10_000, (20, 29)),
           "math": (150, 20_000, (1, 3))}


def _source_of(row_id: int) -> str:
    return ("web", "code", "math")[row_id // 10_000]


def _data(rows: int, first: int, lengths: tuple[int, int]) -> pa.Table:
    ids = np.arange(first, first + rows, dtype=np.int64)
    span = lengths[1] - lengths[0] + 1
    tok = [[int(i)] * (lengths[0] + int(i) % span) for i in ids]
    return pa.table({"id": ids, "x": (ids * 0.5).astype(np.float32),
                     "tok": pa.array(tok, pa.list_(pa.int32()))})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixture")
    wh = Warehouse(root / "wh")
    tables = {name: wh.create(name, _data(*spec)) for name, spec in SOURCES.items()}
    other = wh.create("other", pa.table({"id": pa.array([1, 2, 3], pa.int64()),
                                         "x": pa.array(["a", "b", "c"])}))
    with icefloe.LocalCluster(num_nodes=2, log_dir=root / "logs") as c:
        with c.client() as client:
            for name, table in tables.items():
                client.load(name, table.metadata_location, batch_rows=64)
            client.load("other", other.metadata_location)
        yield c


def _rank_epochs(cluster, weights, world_size, epochs, num_workers=0, **kw):
    """Per rank, per epoch, the batches' ids, read through a DataLoader."""
    out = []
    for r in range(world_size):
        with as_rank(r, world_size):
            ds = CacheDataset(cluster.head_uri, weights, **kw)
            per_epoch = []
            for e in epochs:
                ds.set_epoch(e)
                loader = DataLoader(ds, batch_size=None, num_workers=num_workers,
                                    multiprocessing_context=CONTEXT if num_workers else None)
                per_epoch.append(batch_ids(loader))
            out.append(per_epoch)
    return out


def _in_step_order(per_rank: list[list[list[int]]]) -> list[int]:
    """The rows of a job's batches, step by step, ranks side by side."""
    assert len({len(batches) for batches in per_rank}) == 1, "unequal steps per rank"
    return [i for step in zip(*per_rank, strict=True) for batch in step for i in batch]


def _worst_window_deviation(batches: list[list[int]], weights: dict[str, float],
                            window: int, size=lambda row_id: 1) -> float:
    total = sum(weights.values())
    worst = 0.0
    for w0 in range(0, len(batches) - window + 1):
        counts: Counter = Counter()
        for b in batches[w0:w0 + window]:
            for i in b:
                counts[_source_of(i)] += size(i)
        all_ = sum(counts.values())
        for name, weight in weights.items():
            worst = max(worst, abs(counts[name] / all_ - weight / total))
    return worst


def test_proportions_hold_in_every_window_of_batches(cluster):
    weights = {"web": 0.5, "code": 0.3, "math": 0.2}
    ds = CacheDataset(cluster.head_uri, weights, batch_size=16, seed=4)
    batches = batch_ids(ds)
    assert len(batches) == len(ds) > 20
    assert all(len(b) == 16 for b in batches)
    # Each source gives every step its apportioned rows: off by less than one
    # row per batch from weight x batch_size.
    for window in (1, 10):
        assert _worst_window_deviation(batches, weights, window) < 1 / 16


def test_token_weights_track_tokens(cluster):
    weights = {"web": 0.5, "code": 0.3, "math": 0.2}
    ds = CacheDataset(cluster.head_uri, weights, batch_size=64, mix_by="tokens",
                      token_column="tok", seed=1, epoch_total=50_000)
    batches = batch_ids(ds)
    assert len(batches) == len(ds) >= 120
    lengths = {}
    for rows, first, (lo, hi) in SOURCES.values():
        for i in range(first, first + rows):
            lengths[i] = lo + i % (hi - lo + 1)
    worst = _worst_window_deviation(batches, weights, 100, size=lengths.__getitem__)
    print("worst token-share deviation over 100 batches:", worst)
    assert worst <= 0.02
    # By rows the mix is far from the weights: code's rows are ~4x longer.
    assert _worst_window_deviation(batches, weights, 100) > 0.1


@pytest.mark.parametrize("world_size, num_workers", [(2, 2), (3, 0)])
def test_every_source_row_once_per_its_own_epoch(cluster, world_size, num_workers):
    weights = {"web": 0.6, "code": 0.3, "math": 0.1}
    batch = 10  # 6 + 3 + 1 rows a batch
    runs = _rank_epochs(cluster, weights, world_size, [0, 1, 2], num_workers,
                        batch_size=batch, seed=2)
    steps = [len(runs[r][0]) for r in range(world_size)]
    assert len(set(steps)) == 1, "unequal steps per rank"
    # An epoch of the mixture is one pass of its heaviest source (web).
    assert steps[0] == 1200 // (world_size * 6)
    per_step = {"web": 6, "code": 3, "math": 1}
    for name, (rows, _, _) in SOURCES.items():
        # The source's rows in the order the job read them (steps in order,
        # ranks side by side), cut into the source's own epochs.
        seq = [i for e in range(3) for s in range(steps[0]) for r in range(world_size)
               for i in runs[r][e][s] if _source_of(i) == name]
        per_epoch = (rows // (world_size * per_step[name])) * world_size * per_step[name]
        assert len(seq) == 3 * steps[0] * world_size * per_step[name]
        for k in range(0, len(seq), per_epoch):
            chunk = seq[k:k + per_epoch]
            assert len(set(chunk)) == len(chunk), f"{name}: a row read twice in one epoch"
        if name == "math":  # small: repeats, each repetition its own shuffle
            assert seq[:per_epoch] != seq[per_epoch:2 * per_epoch]


def test_deterministic_per_seed(cluster):
    weights = {"web": 0.6, "code": 0.4}

    def run(seed):
        return batch_ids(CacheDataset(cluster.head_uri, weights, batch_size=20, seed=seed))

    assert run(5) == run(5)
    assert run(5) != run(6)


def test_iter_epoch_takes_a_mixture(cluster):
    weights = {"web": 0.6, "code": 0.4}
    with cluster.client() as client:
        batches = [b["id"].to_pylist() for b in
                   client.iter_epoch(weights, batch_size=20, epoch=1, seed=3)]
    ds = CacheDataset(cluster.head_uri, weights, batch_size=20, seed=3)
    ds.set_epoch(1)
    assert batches == batch_ids(ds)


def test_resume_with_another_world_size(cluster):
    weights = {"web": 0.6, "code": 0.3, "math": 0.1}
    k = 7
    first, per_rank, state = run_then_resume(
        lambda: CacheDataset(cluster.head_uri, weights, batch_size=10, seed=8),
        lambda: CacheDataset(cluster.head_uri, weights, batch_size=20),
        k, 2, 3, epoch=1, num_workers=2)
    assert set(state["sources"]) == set(weights)
    assert state["sources"]["web"]["position"] == 2 * 6 * k
    resumed = _in_step_order(per_rank)
    web_first = [i for i in first if _source_of(i) == "web"]
    web_resumed = [i for i in resumed if _source_of(i) == "web"]
    # web is the epoch's source: the resumed job finishes its pass, every row
    # once (less the resumed job's own drop_last tail).
    assert not set(web_first) & set(web_resumed)
    assert len(set(web_resumed)) == len(web_resumed)
    left = 1200 - 2 * 6 * k
    assert len(web_resumed) == left - left % (3 * 12)
    # code continues its own epoch where the first job stopped.
    code_first = [i for i in first if _source_of(i) == "code"]
    code_resumed = [i for i in resumed if _source_of(i) == "code"]
    assert not set(code_first) & set(code_resumed[:600 - len(code_first)])


def test_stateful_dataloader_round_trip(cluster):
    from torchdata.stateful_dataloader import StatefulDataLoader

    def loader():
        ds = CacheDataset(cluster.head_uri, {"web": 0.7, "math": 0.3}, batch_size=10, seed=1)
        return StatefulDataLoader(ds, batch_size=None, num_workers=2,
                                  multiprocessing_context=CONTEXT)

    assert_loader_resumes(loader)


def test_one_name_keeps_todays_dataset(cluster):
    ds = CacheDataset(cluster.head_uri, "web", batch_size=100, shuffle="none")
    assert type(ds) is CacheDataset
    assert batch_ids(ds)[0] == list(range(100))


@pytest.mark.parametrize("weights, error, words", [
    ({"web": -0.5, "code": 1.0}, InvalidArgument, "'web'"),
    ({"web": 0.0, "code": 0.0}, InvalidArgument, "zero"),
    ({}, InvalidArgument, "no source"),
    (["web", "code"], InvalidArgument, "not list"),
    ({"web": 0.5, "nope": 0.5}, NotFound, "'nope'"),
    ({"web": 0.5, "other": 0.5}, InvalidArgument, "'other'"),
    ({"web": 0.99, "math": 0.01}, InvalidArgument, "'math'"),
])
def test_bad_mixtures_are_refused_before_the_first_batch(cluster, weights, error, words):
    with pytest.raises(error, match=words):
        ds = CacheDataset(cluster.head_uri, weights, batch_size=10)
        next(iter(ds))


def test_common_projection_and_token_column_checks(cluster):
    ds = CacheDataset(cluster.head_uri, {"web": 0.5, "other": 0.5}, batch_size=2,
                      columns=["id"])
    assert len(next(iter(ds))["id"]) == 2
    with pytest.raises(InvalidArgument, match="token_column"):
        Mixture({"web": 1.0}, mix_by="tokens")
    with pytest.raises(InvalidArgument, match="pinned"):  # not silently ignored
        CacheDataset(cluster.head_uri, {"web": 1.0}, batch_size=2, follow="pinned")
    # A state keeps its drop_last, as one dataset's does.
    kept = CacheDataset(cluster.head_uri, {"web": 1.0}, batch_size=2, drop_last=False)
    with pytest.raises(ValueError, match="drop_last=False"):
        CacheDataset(cluster.head_uri, {"web": 1.0}, batch_size=2).load_state_dict(
            kept.state_dict(steps=1))
    with pytest.raises(InvalidArgument, match="'x'.*list"):
        next(iter(CacheDataset(cluster.head_uri, {"web": 0.5, "code": 0.5}, batch_size=10,
                               mix_by="tokens", token_column="x")))


# drop_last=False: shares of 7, 7 and 4 rows that divide no source's rows
# (1200, 600, 150) for 1, 2 or 3 ranks, so every source has steps that end
# one of its epochs and begin the next.
UNEVEN = {"web": 7, "code": 7, "math": 4}


def _streams(cluster, seed: int, epochs: int) -> dict[str, list[int]]:
    """Each source's rows as one stream of its epochs: epoch e's order is
    that of a single-dataset epoch e (every row, in order)."""
    out = {}
    with cluster.client() as c:
        for name, (rows, _, _) in SOURCES.items():
            out[name] = [i for e in range(epochs) for b in c.iter_epoch(
                name, batch_size=rows, seed=seed, epoch=e, shuffle="window", drop_last=False)
                for i in b["id"].to_pylist()]
    return out


def _of_source(rows: list[int], name: str) -> list[int]:
    return [i for i in rows if _source_of(i) == name]


def _slice_at(part: list[int], stream: list[int]) -> int | None:
    """Where ``part`` is a run of consecutive elements of ``stream`` (None: nowhere)."""
    return next((k for k in range(len(stream))
                 if stream[k] == part[0] and stream[k:k + len(part)] == part), None)


@pytest.mark.parametrize("world_size, num_workers",
                         [(1, 0), (1, 2), (2, 0), (2, 2), (3, 0), (3, 2)])
def test_drop_last_false_reads_every_source_row_once_per_its_own_epoch(
        cluster, world_size, num_workers):
    runs = _rank_epochs(cluster, UNEVEN, world_size, [0, 1], num_workers, batch_size=18,
                        seed=2, drop_last=False)
    for e in (0, 1):
        assert len({len(runs[r][e]) for r in range(world_size)}) == 1, "unequal steps"
        assert all(len(b) == 18 for r in range(world_size) for b in runs[r][e])
        for r in range(world_size):  # the same share of each source in every batch
            assert all(Counter(map(_source_of, b)) == UNEVEN for b in runs[r][e])
    # The epoch is web's pass: its last step reads the end of web's epoch
    # (and the first rows of the next), none of it dropped.
    assert len(runs[0][0]) == -(-1200 // (world_size * 7))
    streams = _streams(cluster, seed=2, epochs=12)
    read = [i for e in (0, 1) for i in _in_step_order([runs[r][e] for r in range(world_size)])]
    for name, (rows, _, _) in SOURCES.items():
        seq = _of_source(read, name)
        # The job read the source's epochs one after the other, every row of
        # each once, each in its own order: a prefix of its stream.
        assert seq == streams[name][:len(seq)], name
        assert len(seq) > rows


@pytest.mark.parametrize("per_batch", [False, True])
def test_drop_last_false_resume_with_another_world_size(cluster, per_batch):
    weights = {"web": 0.6, "code": 0.4} if per_batch else UNEVEN
    kw = {"per_batch": True, "run_steps": 2} if per_batch else {}
    k = 9
    first = []
    for r in range(2):
        with as_rank(r, 2):
            ds = CacheDataset(cluster.head_uri, weights, batch_size=18, seed=8,
                              drop_last=False, **kw)
            ds.set_epoch(1)
            first.append(batch_ids(islice(ds, k)))
            state = ds.state_dict(steps=k)
    assert state["drop_last"] is False
    per_rank = []
    for r in range(3):
        with as_rank(r, 3):
            ds2 = CacheDataset(cluster.head_uri, weights, batch_size=10, drop_last=False, **kw)
            ds2.load_state_dict(state)
            per_rank.append(batch_ids(DataLoader(ds2, batch_size=None, num_workers=2,
                                            multiprocessing_context=CONTEXT)))
    first_rows, resumed = _in_step_order(first), _in_step_order(per_rank)
    streams = _streams(cluster, seed=8, epochs=14)
    at = {}
    for name in weights:
        a, b = _of_source(first_rows, name), _of_source(resumed, name)
        # The resumed job goes on exactly where the first stopped: together
        # they read a run of the source's stream, nothing skipped or repeated.
        assert a and b
        at[name] = _slice_at(a + b, streams[name])
        assert at[name] is not None, f"{name}: rows skipped or repeated"
    # web's pass ends the epoch: from within a step of the start of web's
    # epoch 1 to its end (and into the first step of its epoch 2).
    web = len(_of_source(first_rows + resumed, "web"))
    assert 1200 <= at["web"] < 1200 + 2 * 18 and 2400 <= at["web"] + web < 2400 + 3 * 10


@pytest.mark.parametrize("world_size, num_workers", [(2, 2), (3, 0)])
def test_per_batch_drop_last_false_every_source_row_once_per_its_own_epoch(
        cluster, world_size, num_workers):
    weights = {"web": 0.6, "code": 0.3, "math": 0.1}
    batch = 7  # divides none of 1200, 600, 150 by 7, 14 or 21 rows a step
    runs = _rank_epochs(cluster, weights, world_size, [0, 1], num_workers, batch_size=batch,
                        seed=2, per_batch=True, run_steps=2, drop_last=False)
    for e in (0, 1):
        assert len({len(runs[r][e]) for r in range(world_size)}) == 1, "unequal steps"
        for r in range(world_size):
            assert all(len(b) == batch for b in runs[r][e])
            assert ([len({_source_of(i) for i in b}) for b in runs[r][e]]
                    == [1] * len(runs[r][e]))
    streams = _streams(cluster, seed=2, epochs=4)
    read = [i for e in (0, 1) for i in _in_step_order([runs[r][e] for r in range(world_size)])]
    for name in weights:
        seq = _of_source(read, name)
        assert seq == streams[name][:len(seq)], name
    # Each epoch is web's whole pass: 2 x 1200 rows and a step's share more.
    assert 2400 <= len(_of_source(read, "web")) < 2400 + 2 * world_size * batch


def test_persistent_workers_see_set_epoch_and_resume(cluster):
    weights = {"web": 0.6, "code": 0.3, "math": 0.1}
    ds = CacheDataset(cluster.head_uri, weights, batch_size=20, seed=6)
    loader = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True,
                        multiprocessing_context=CONTEXT)
    orders = []
    for e in range(2):
        ds.set_epoch(e)
        orders.append(batch_ids(loader))
    fresh = CacheDataset(cluster.head_uri, weights, batch_size=20, seed=6)
    fresh.set_epoch(1)
    assert orders[1] == batch_ids(fresh) != orders[0]
    # A resume state loaded in the main process reaches the workers.
    fresh.set_epoch(0)
    state = fresh.state_dict(steps=10)
    ds.load_state_dict(state)
    assert batch_ids(loader) == orders[0][10:]


def test_a_node_dying_mid_epoch_changes_no_batch(tmp_path):
    # Each source fails over as one dataset does; the small source opens its
    # later epochs after the kill, on the survivor.
    wh = Warehouse(tmp_path / "wh")
    tables = {"web": wh.create("web", _data(3000, 0, (1, 2))),
              "math": wh.create("math", _data(200, 20_000, (1, 2)))}
    weights = {"web": 0.8, "math": 0.2}
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs") as c:
        with c.client() as client:
            for name, table in tables.items():
                client.load(name, table.metadata_location, batch_rows=100, replication=2)
            want = [b["id"].to_pylist() for b in
                    client.iter_epoch(weights, batch_size=10, seed=2, epoch=1)]
            assert len(want) == 3000 // 8
            got = []
            for b in client.iter_epoch(weights, batch_size=10, seed=2, epoch=1, prefetch=0):
                got.append(b["id"].to_pylist())
                if len(got) == 50:
                    c.kill_node(0)
            assert got == want


def test_a_source_refreshed_mid_job_is_a_clear_error(tmp_path):
    # The mixture's arithmetic holds each source's row count; a source epoch
    # that the head binds to a refreshed copy of another size is refused,
    # naming the source, rather than read with the wrong steps.
    wh = Warehouse(tmp_path / "wh")
    web = wh.create("web", _data(1200, 0, (1, 2)))
    grow = wh.create("grow", _data(100, 20_000, (1, 2)))
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path / "logs") as c:
        with c.client() as client:
            client.load("web", web.metadata_location)
            client.load("grow", grow.metadata_location)
            batches = client.iter_epoch({"web": 0.5, "grow": 0.5}, batch_size=10, prefetch=0)
            for _ in range(5):
                next(batches)
            grow.append(_data(100, 20_100, (1, 2)))
            client.refresh("grow")
            with pytest.raises(InvalidArgument, match="'grow'.*200 rows.*100"):
                for _ in batches:
                    pass


def test_per_batch_each_batch_is_one_source_in_proportion(cluster):
    weights = {"web": 0.5, "code": 0.3, "math": 0.2}
    ds = CacheDataset(cluster.head_uri, weights, batch_size=10, seed=3, per_batch=True)
    batches = batch_ids(ds)
    assert all(len({_source_of(i) for i in b}) == 1 for b in batches)
    # An epoch is web's pass: 120 batches of web, the last one last.
    kinds = [_source_of(b[0]) for b in batches]
    assert len(batches) == len(ds) and kinds.count("web") == 120 and kinds[-1] == "web"
    # The pattern repeats every 100 runs: any 100 consecutive batches hold
    # exactly 50, 30 and 20 of each source's.
    assert _worst_window_deviation(batches, weights, 100) < 1e-9


@pytest.mark.parametrize("world_size, num_workers", [(2, 2), (3, 0)])
def test_per_batch_every_source_row_once_per_its_own_epoch(cluster, world_size, num_workers):
    weights = {"web": 0.6, "code": 0.3, "math": 0.1}
    runs = _rank_epochs(cluster, weights, world_size, [0, 1], num_workers, batch_size=10,
                        seed=2, per_batch=True, run_steps=2)
    steps = len(runs[0][0])
    assert all(len(runs[r][e]) == len(runs[0][e]) for r in range(world_size) for e in (0, 1))
    for r in range(world_size):
        for e in (0, 1):  # every rank reads the same source at each step
            assert ([_source_of(b[0]) for b in runs[r][e]]
                    == [_source_of(b[0]) for b in runs[0][e]])
    for name, (rows, _, _) in SOURCES.items():
        seq = [i for e in (0, 1) for s in range(len(runs[0][e])) for r in range(world_size)
               for i in runs[r][e][s] if _source_of(i) == name]
        per_epoch = (rows // (world_size * 10)) * world_size * 10
        for k in range(0, len(seq), per_epoch):
            chunk = seq[k:k + per_epoch]
            assert len(set(chunk)) == len(chunk), f"{name}: a row read twice in one epoch"
    assert steps > 0


def test_per_batch_resume_with_another_world_size(cluster):
    weights = {"web": 0.6, "code": 0.4}
    k = 9

    def dataset(**kw):
        return CacheDataset(cluster.head_uri, weights, batch_size=10, per_batch=True, run_steps=2,
                            **kw)

    first, per_rank, _ = run_then_resume(lambda: dataset(seed=8), dataset, k, 2, 3,
                                         num_workers=2)
    resumed = _in_step_order(per_rank)
    for name in weights:
        a = [i for i in first if _source_of(i) == name]
        b = [i for i in resumed if _source_of(i) == name]
        rows = SOURCES[name][0]
        assert not set(a) & set(b[:rows - len(a)]), f"{name}: a consumed row read again"
    # web's pass ends the epoch: the two jobs read it all, once, but for the
    # resumed job's drop_last tail (under one step of 3 x 10 rows).
    web = [i for i in first + resumed if _source_of(i) == "web"]
    assert len(set(web)) == len(web) > 1200 - 30


def test_per_batch_run_steps_must_fit_the_workers(cluster):
    ds = CacheDataset(cluster.head_uri, {"web": 0.5, "code": 0.5}, batch_size=10,
                      per_batch=True, run_steps=3)
    loader = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=CONTEXT)
    with pytest.raises(InvalidArgument, match="run_steps a multiple of 2"):
        next(iter(loader))
    with pytest.raises(InvalidArgument, match="per_batch"):
        Mixture({"web": 1.0}, run_steps=2)


@pytest.mark.parametrize("seed", range(5))
def test_arithmetic_matches_a_step_by_step_count(seed):
    # The positions and epoch lengths are closed forms; check them against
    # counting step by step (no servers).
    print("seed", seed)
    rng = np.random.default_rng(seed)
    for _ in range(50):
        shares = rng.random(int(rng.integers(1, 5))) + 0.01
        shares /= shares.sum()
        total = int(rng.integers(1, 300))
        parts = apportion(list(shares), total)
        assert sum(parts) == total
        assert all(abs(p - s * total) < 1 for p, s in zip(parts, shares, strict=True))
        counts = [int(c) for c in rng.integers(1, 6, len(shares))]
        pattern = pattern_of(counts)
        assert [pattern.count(i) for i in range(len(counts))] == counts
        source = Source("s", int(rng.integers(1, 500)), int(rng.integers(1, 9)),
                        int(rng.integers(1, 4)))
        if source.rows < source.step_positions:
            continue
        at, steps = Position(0, 0), int(rng.integers(0, 400))
        for _ in range(steps):  # one step at a time
            at = source.normal(at)
            at = Position(at.epoch, at.position + source.step_positions)
        want = source.normal(at) if steps else at
        assert source.normal(source.advance(Position(0, 0), steps)) == want
        # drop_last=False: the source is one stream of its epochs; a step
        # may end one epoch and begin the next.
        stream = dataclasses.replace(source, drop_last=False)
        at, starts = Position(0, 0), []
        for _ in range(steps):
            starts.append(at)
            end = at.position + stream.step_positions
            at = Position(at.epoch + 1, end - stream.rows) if end >= stream.rows else \
                Position(at.epoch, end)
        assert stream.advance(Position(0, 0), steps) == at
        t = 0
        for first, t0, n in stream.segments(Position(0, 0), steps):
            assert t0 == t
            if isinstance(first, Straddle):
                assert n == 1 and first.at == starts[t]
                assert first.at.position < stream.rows < first.at.position + stream.step_positions
            else:
                assert first == starts[t] and all(
                    starts[t + j] == Position(first.epoch, first.position
                                              + j * stream.step_positions) for j in range(n))
                assert first.position + n * stream.step_positions <= stream.rows
            t += n
        assert t == steps
        if steps:  # the pass: the steps that begin in the source's epoch
            assert stream.left(Position(0, 0)) == -(-stream.rows // stream.step_positions)
        runs = Runs(pattern, int(rng.integers(1, 4)))
        run0, i = int(rng.integers(0, len(pattern))), int(rng.integers(0, len(counts)))
        need = int(rng.integers(1, 60))
        of_step = runs.sources_of(run0, 10_000)
        until = runs.steps_until(i, run0, need)
        assert np.count_nonzero(of_step[:until] == i) == need and of_step[until - 1] == i


def test_status_shows_each_sources_progress(cluster):
    """status's jobs break a job's rows down by source: a mixture's in
    proportion to its weights, a single dataset's as one source."""
    from icefloe import _stall
    from icefloe._status_text import render

    weights = {"web": 0.5, "code": 0.3, "math": 0.2}
    read: Counter = Counter()
    with cluster.client() as c:
        batches = c.iter_epoch(weights, batch_size=16, seed=3, job="mix-status")
        for _, batch in zip(range(20), batches, strict=False):
            read.update(_source_of(i) for i in batch["id"].to_pylist())
        batches.close()
        single = sum(b.num_rows for b in c.iter_epoch("math", batch_size=50, job="one-status"))
        assert _stall.flush_all(timeout_s=30)
        status = c.status()
    jobs = {j["job"]: j for j in status["jobs"]}
    sources = {s["dataset"]: s for s in jobs["mix-status"]["sources"]}
    assert sorted(sources) == sorted(weights)
    assert {name: s["rows_total"] for name, s in sources.items()} == dict(read)
    assert sum(read.values()) == 20 * 16 == jobs["mix-status"]["rows_total"]
    for name, weight in weights.items():
        assert abs(read[name] / (20 * 16) - weight) < 1 / 16, read
        assert sources[name]["batches_total"] == 20
        assert sources[name]["rows_per_s"] > 0
    [one] = jobs["one-status"]["sources"]
    assert one["dataset"] == "math"
    assert one["rows_total"] == single == jobs["one-status"]["rows_total"] == 150
    assert f"web: {read['web']:,} rows" in render(status)  # `icefloe status`


@pytest.mark.parametrize("per_batch", [False, True])
def test_status_rates_a_mixture_job_over_its_wall_time(cluster, per_batch):
    """A mixture's sources are read side by side, each source's reports
    covering the whole time: the job's rows/s and elapsed time are those of
    its wall time, not its sources' times added up (1/N of the rate)."""
    import time

    from icefloe import _stall

    weights = {"web": 0.5, "code": 0.3, "math": 0.2}
    job = f"mix-rate-{int(per_batch)}"
    rows = 0
    with cluster.client() as c:
        began = time.perf_counter()
        for batch in c.iter_epoch(weights, batch_size=16, seed=3, job=job, per_batch=per_batch,
                                  epoch_total=40 * 16):
            rows += batch.num_rows
            time.sleep(0.01)  # the loop's own work: the wall time is the loop's
        wall_s = time.perf_counter() - began
        assert _stall.flush_all(timeout_s=30)
        [status] = [j for j in c.status()["jobs"] if j["job"] == job]
    assert status["rows_total"] == rows == 40 * 16
    wall_rate = rows / wall_s
    print(f"per_batch={per_batch}: status {status['rows_per_s']:.0f} rows/s over "
          f"{status['elapsed_s_total']:.3f} s, the loop {wall_rate:.0f} rows/s over {wall_s:.3f} s")
    # Bounds that need no timing: summing 3 sources' times gives a third of
    # the rate (elapsed about 3x the wall time); the reports' intervals span
    # the loop's own sleeps between batches, however long the set-up before
    # the first batch took (it may be most of the wall time on a loaded machine).
    assert status["rows_per_s"] / wall_rate > 0.5
    assert status["elapsed_s_total"] < 1.5 * wall_s
    assert status["elapsed_s_total"] >= 0.01 * (40 - 1)


def test_status_counts_straddle_reads_under_their_consumer(cluster):
    """drop_last=False: a step that reaches the end of a source's epoch
    reads its parts as one-consumer plans; status counts them under the
    consumer whose step it is. Each rank of two reads as its own job here,
    as DataLoader worker 1 of 2: every job shows that one consumer."""
    from icefloe import _stall

    # math's share is 4 rows of 20: 2 ranks x 4 positions a step do not
    # divide its 150 rows, so steps 18, 37 and 56 straddle its epochs (37
    # is worker 1's); web's pass is 60 steps.
    weights = {"web": 0.5, "code": 0.3, "math": 0.2}
    with cluster.client() as c:
        rows = {}
        for r in range(2):
            rows[r] = sum(b.num_rows for b in c.iter_epoch(
                weights, batch_size=20, seed=2, drop_last=False, world_size=2, rank=r,
                num_workers=2, worker=1, job=f"mix-straddle-{r}"))
        assert _stall.flush_all(timeout_s=30)
        jobs = {j["job"]: j for j in c.status()["jobs"]}
    for r in range(2):
        status = jobs[f"mix-straddle-{r}"]
        assert rows[r] == 30 * 20 == status["rows_total"]
        assert (status["consumers"], status["ranks"]) == (1, 1), status
