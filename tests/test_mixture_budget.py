"""Token-budget batches over a weighted mixture (issue 46, "Works with
mixtures"; docs/epochs.md sections 6 and 7): every batch bounded by the
budget, each source's share held in tokens in every window of 100 batches,
every source row once per its own epoch (the public planner's sequence,
exactly), equal steps and balanced tokens across ranks, resume with another
world size, per_batch, and bad input refused before the first batch. A real
LocalCluster throughout."""

from __future__ import annotations

import time
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from ddp_util import as_rank
from iceberg_util import Warehouse
from torch.utils.data import DataLoader

import icefloe
from icefloe import _token_batches as tb
from icefloe._length_codes import encode_lengths
from icefloe.errors import InvalidArgument, NotFound
from icefloe.torch import CacheDataset

SEED = 46  # the lengths below come from it
# rows, first id, (log-mean tokens, shortest, longest): ids tell the source apart.
SOURCES = {"web": (12000, 0, (3.7, 4, 200)), "code": (2000, 100_000, (5.0, 20, 400)),
           "math": (800, 200_000, (2.7, 2, 30))}
WEIGHTS = {"web": 0.6, "code": 0.3, "math": 0.1}
BUDGET = 4096
CONTEXT = "forkserver"  # gRPC cannot be used after fork (as tests/test_epochs.py)


def _source_lengths(name: str) -> np.ndarray:
    rows, _, (mu, lo, hi) = SOURCES[name]
    rng = np.random.default_rng([SEED, list(SOURCES).index(name)])
    return np.clip(rng.lognormal(mu, 0.7, rows), lo, hi).astype(np.int64)


LENGTHS = {name: _source_lengths(name) for name in SOURCES}


def _source_of(row_id: int) -> str:
    return ("web", "code", "math")[row_id // 100_000]


def _tokens_of(row_id: int) -> int:
    name = _source_of(row_id)
    return int(LENGTHS[name][row_id - SOURCES[name][1]])


def _data(name: str) -> pa.Table:
    rows, first, _ = SOURCES[name]
    lengths = LENGTHS[name]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = np.repeat(np.arange(first, first + rows, dtype=np.int32), lengths)
    return pa.table({"id": np.arange(first, first + rows, dtype=np.int64),
                     "tok": pa.ListArray.from_arrays(pa.array(offsets),
                                                     pa.array(values, pa.int32()))})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixture-budget")
    wh = Warehouse(root / "wh")
    tables = {name: wh.create(name, _data(name)) for name in SOURCES}
    other = wh.create("plain", pa.table({"id": np.arange(50, dtype=np.int64),
                                         "tok": pa.array(np.arange(50), pa.int64())}))
    with icefloe.LocalCluster(num_nodes=2, log_dir=root / "logs") as c:
        with c.client() as client:
            for name, table in tables.items():
                client.load(name, table.metadata_location, batch_rows=500)
            client.load("plain", other.metadata_location)
        yield c


def _epoch(client, weights=WEIGHTS, **kw) -> list[list[int]]:
    fields = {"batch_tokens": BUDGET, "token_column": "tok", "seed": SEED, **kw}
    return [b["id"].to_pylist() for b in client.iter_epoch(weights, **fields)]


def _worst_window_deviation(batches: list[list[int]], weights: dict[str, float],
                            window: int = 100) -> float:
    """The largest |token share - weight| of any source over any ``window``
    consecutive batches."""
    names = list(weights)
    per = np.zeros((len(batches), len(names)))
    for k, batch in enumerate(batches):
        for i in batch:
            per[k, names.index(_source_of(i))] += _tokens_of(i)
    cum = np.concatenate([np.zeros((1, len(names))), np.cumsum(per, axis=0)])
    windows = cum[window:] - cum[:-window]
    shares = windows / windows.sum(axis=1, keepdims=True)
    want = np.array([weights[n] for n in names]) / sum(weights.values())
    return float(np.abs(shares - want).max())


def test_mixed_batches_hold_token_shares_in_every_window_and_the_budget(cluster):
    with cluster.client() as client:
        batches = _epoch(client, varlen=True)
    assert len(batches) >= 150
    # varlen: a batch's tokens, all sources together, are within the budget.
    assert max(sum(_tokens_of(i) for i in b) for b in batches) <= BUDGET
    assert all({_source_of(i) for i in b} == set(WEIGHTS) for b in batches)
    worst = _worst_window_deviation(batches, WEIGHTS)
    print("worst token-share deviation over 100 batches:", worst)
    assert worst <= 0.02
    # The shares of the budget are fitted to how full each source's batches
    # get (code's long rows fill its share least): the epoch's token shares
    # are the weights' to a fraction of a point.
    overall = _worst_window_deviation(batches, WEIGHTS, window=len(batches))
    print("token-share deviation over the epoch:", overall)
    assert overall <= 0.005


def test_per_batch_holds_token_shares_and_the_padded_budget(cluster):
    with cluster.client() as client:
        batches = _epoch(client, per_batch=True)
    assert len(batches) >= 150
    for b in batches:
        assert len({_source_of(i) for i in b}) == 1
        assert len(b) * max(_tokens_of(i) for i in b) <= BUDGET  # padded size
    worst = _worst_window_deviation(batches, WEIGHTS)
    print("worst token-share deviation over 100 batches:", worst)
    assert worst <= 0.02


def _source_plan(name: str, budget: int, epoch: int) -> tb.TokenBatchPlan:
    """The source epoch's plan for ``budget`` (a share of BUDGET, or BUDGET)
    from the codes the client makes for the job's budget, BUDGET."""
    return tb.plan_epoch(encode_lengths(LENGTHS[name], BUDGET), tb.TokenBudget(budget, "tok"),
                         seed=SEED, epoch=epoch)


def _expected(name: str, budget: int, world_size: int, count: int) -> list[list[int]]:
    """A source's first ``count`` rows as its own epochs give them: each
    epoch's planned sequence, read ``world_size`` batches a step, its
    drop_last tail left; returned per source epoch."""
    out, total, epoch = [], 0, 0
    while total < count:
        plan = _source_plan(name, budget, epoch)
        steps = plan.steps(world_size, 0, True)
        rows, _ = plan.rows_of(plan.order[:steps * world_size])
        out.append((rows + SOURCES[name][1]).tolist())
        total += len(rows)
        epoch += 1
    return out


def _rank_batches(cluster, world_size: int, num_workers: int, **kw) -> list[list[list[int]]]:
    out = []
    for r in range(world_size):
        with as_rank(r, world_size):
            ds = CacheDataset(cluster.head_uri, WEIGHTS, batch_tokens=BUDGET, token_column="tok",
                              seed=SEED, **kw)
            loader = DataLoader(ds, batch_size=None, num_workers=num_workers,
                                multiprocessing_context=CONTEXT if num_workers else None)
            out.append([b["id"].tolist() for b in loader])
    return out


@pytest.mark.parametrize("per_batch", [False, True])
def test_every_source_row_once_per_its_own_epoch(cluster, per_batch):
    world_size = 2
    kw = {"per_batch": True} if per_batch else {"varlen": True}
    per_rank = _rank_batches(cluster, world_size, 2, **kw)
    steps = {len(b) for b in per_rank}
    assert len(steps) == 1, "unequal steps per rank"
    with as_rank(0, world_size):  # each source's budget: mixed batches fit shares to fills
        resolved = CacheDataset(cluster.head_uri, WEIGHTS, batch_tokens=BUDGET,
                                token_column="tok", seed=SEED, **kw)._resolve()
    budgets = {s.name: s.budget.batch_tokens for s in resolved.sources}
    assert budgets == {n: BUDGET for n in WEIGHTS} if per_batch else sum(budgets.values()) == BUDGET
    for name in WEIGHTS:
        # The source's rows as the job read them: steps in order, ranks side
        # by side; each source epoch is its own planned sequence, exactly.
        seq = [i for step in zip(*per_rank, strict=True) for batch in step for i in batch
               if _source_of(i) == name]
        want = _expected(name, budgets[name], world_size, len(seq))
        assert seq == [i for epoch in want for i in epoch][:len(seq)], name
        for epoch in want:
            assert len(set(epoch)) == len(epoch), f"{name}: a row read twice in one epoch"
        if name == "math":  # small: repeats, each repetition its own shuffle
            assert len(want) >= 3 and want[0] != want[1]
        if name == "web":  # the epoch is its pass
            assert len(want) == 1 and len(seq) == len(want[0])


def test_ranks_have_equal_steps_and_alike_tokens(cluster):
    world_size = 4
    with cluster.client() as client:
        per_rank = [_epoch(client, varlen=True, world_size=world_size, rank=r)
                    for r in range(world_size)]
    assert len({len(b) for b in per_rank}) == 1
    tokens = np.array([[sum(_tokens_of(i) for i in b) for b in rank] for rank in per_rank])
    spread = (tokens.max(axis=0) - tokens.min(axis=0)) / tokens.max(axis=0)
    print("per-step token spread across 4 ranks: median", np.median(spread), "max", spread.max())
    # Each source's batches of a step are neighbours of its sorted window.
    assert np.median(spread) < 0.05
    assert np.mean(spread <= 0.10) >= 0.9


def test_deterministic_per_seed_and_iter_epoch_matches_cache_dataset(cluster):
    with cluster.client() as client:
        a = _epoch(client, varlen=True, epoch=1)
        assert a == _epoch(client, varlen=True, epoch=1)
        assert a != _epoch(client, varlen=True, epoch=1, seed=SEED + 1)
    ds = CacheDataset(cluster.head_uri, WEIGHTS, batch_tokens=BUDGET, token_column="tok",
                      varlen=True, seed=SEED)
    ds.set_epoch(1)
    assert [b["id"].tolist() for b in ds] == a
    assert len(ds) == len(a)


@pytest.mark.parametrize("per_batch", [False, True])
def test_resume_with_another_world_size(cluster, per_batch):
    kw = {"per_batch": True} if per_batch else {"varlen": True}
    k = 20
    first = []
    for r in range(2):
        with as_rank(r, 2):
            ds = CacheDataset(cluster.head_uri, WEIGHTS, batch_tokens=BUDGET,
                              token_column="tok", seed=SEED, **kw)
            first += [i for b in list(ds)[:k] for i in b["id"].tolist()]
            state = ds.state_dict(steps=k)
    assert set(state["sources"]) == set(WEIGHTS)
    if not per_batch:  # every source took 2 batches a step of its own sequence
        assert all(state["sources"][n] == {"epoch": 0, "position": 2 * k} for n in ("web", "code"))
    per_rank = []
    for r in range(3):
        with as_rank(r, 3):
            ds2 = CacheDataset(cluster.head_uri, WEIGHTS, batch_tokens=BUDGET,
                               token_column="tok", **kw)
            ds2.load_state_dict(state)
            per_rank.append([b["id"].tolist() for b in
                             DataLoader(ds2, batch_size=None, num_workers=2,
                                        multiprocessing_context=CONTEXT)])
    assert len({len(b) for b in per_rank}) == 1, "unequal steps per rank"
    resumed = [i for s in zip(*per_rank, strict=True) for b in s for i in b]
    budget = ds2._resolve().sources[0].budget.batch_tokens
    plan = _source_plan("web", budget, 0)
    full_rows = int(plan.count[plan.order[:plan.num_full]].sum())
    web = [i for i in first + resumed if _source_of(i) == "web"]
    # web's pass ends the epoch: the two jobs read it once, but for the
    # resumed job's drop_last tail (under one step of 3 batches).
    assert len(set(web)) == len(web)
    tail = np.sort(plan.count[plan.order[:plan.num_full]])[-2:].sum()
    assert full_rows - tail <= len(web) <= full_rows
    for name in ("code",):  # continues its own epoch: nothing consumed read again
        a = [i for i in first if _source_of(i) == name]
        b = [i for i in resumed if _source_of(i) == name]
        assert a and b and not set(a) & set(b)


def test_stateful_dataloader_round_trip(cluster):
    # A DataLoader worker's own state (its batches from the epoch's start)
    # resumes each worker where it stopped.
    from torchdata.stateful_dataloader import StatefulDataLoader

    def loader():
        ds = CacheDataset(cluster.head_uri, WEIGHTS, batch_tokens=BUDGET, token_column="tok",
                          varlen=True, seed=SEED)
        return StatefulDataLoader(ds, batch_size=None, num_workers=2,
                                  multiprocessing_context=CONTEXT)

    full = [b["id"].tolist() for b in loader()]
    it = iter(first_loader := loader())
    head = [next(it)["id"].tolist() for _ in range(7)]
    state = first_loader.state_dict()
    del it
    second = loader()
    second.load_state_dict(state)
    assert head + [b["id"].tolist() for b in second] == full


def test_budget_must_hold_every_source_and_bad_input_is_refused(cluster):
    def first(weights=WEIGHTS, **kw):
        fields = {"batch_tokens": BUDGET, "token_column": "tok", "seed": SEED, "varlen": True}
        ds = CacheDataset(cluster.head_uri, weights, **{**fields, **kw})
        return next(iter(ds))

    # Mixed batches bound their total tokens: padded size would not hold.
    with pytest.raises(InvalidArgument, match="varlen=True.*per_batch"):
        first(varlen=False)
    with pytest.raises(InvalidArgument, match='mix_by="tokens"'):
        first(mix_by="rows")
    with pytest.raises(ValueError, match="batch_size and batch_tokens"):
        first(batch_size=10)
    # code's share of 1000 tokens is 300: rows longer are refused, naming the source.
    over = int((LENGTHS["code"] > 300).sum())
    with pytest.raises(InvalidArgument, match=rf"source 'code'.*300 of 1000.*{over} rows"):
        first(batch_tokens=1000)
    with pytest.raises(NotFound, match="'nope'"):
        first({"web": 0.5, "nope": 0.5})
    with pytest.raises(InvalidArgument, match="'plain'.*list<int32>"):
        first({"web": 0.5, "plain": 0.5}, columns=["id"])
    with pytest.raises(InvalidArgument, match="'math'"):  # its share is no token
        first({"web": 0.9999, "math": 0.0001})
    # too_long="drop" drops and reads the rest, every batch within its share.
    ds = CacheDataset(cluster.head_uri, WEIGHTS, batch_tokens=1000, token_column="tok",
                      varlen=True, too_long="drop", seed=SEED)
    batch = next(iter(ds))
    assert len(batch["id"]) > 0


def _timed(batches) -> tuple[list[list[int]], float]:
    """The batches' ids and the seconds the loop waited in ``next`` for them
    (a consumer's stall meter times inside that call: its waits are within)."""
    out, waited = [], 0.0
    while True:
        t0 = time.perf_counter()
        batch = next(batches, None)
        waited += time.perf_counter() - t0
        if batch is None:
            return out, waited
        out.append(batch["id"].to_pylist())


def _job_status(client, job: str) -> dict:
    from icefloe import _stall

    assert _stall.flush_all(timeout_s=30)
    [status] = [j for j in client.status()["jobs"] if j["job"] == job]
    return status


@pytest.mark.parametrize("per_batch", [False, True])
def test_status_shows_a_budget_mixture_jobs_progress(cluster, per_batch):
    """A token-budget mixture reads rows with takes; its consumers report
    each source's rows and batches under the job as other mixtures do, and
    the loop's waits once (not once a source)."""
    kw = {"per_batch": True} if per_batch else {"varlen": True}
    job = f"budget-mix-status-{int(per_batch)}"
    read, batches_of, waited = Counter(), Counter(), 0.0
    with cluster.client() as client:
        for r in range(2):  # two ranks of one job
            batches, w = _timed(client.iter_epoch(
                WEIGHTS, batch_tokens=BUDGET, token_column="tok", seed=SEED, job=job,
                world_size=2, rank=r, epoch_total=60 * BUDGET, **kw))
            waited += w
            for b in batches:
                per = Counter(_source_of(i) for i in b)
                read.update(per)
                batches_of.update(per.keys())
        status = _job_status(client, job)
    assert sum(batches_of.values()) >= 60
    sources = {s["dataset"]: s for s in status["sources"]}
    assert sorted(sources) == sorted(WEIGHTS) == sorted(read)
    assert {n: s["rows_total"] for n, s in sources.items()} == dict(read)
    assert {n: s["batches_total"] for n, s in sources.items()} == dict(batches_of)
    assert status["rows_total"] == sum(read.values())
    assert all(s["rows_per_s"] > 0 for s in sources.values())
    assert status["consumers"] == 2 and status["ranks"] == 2
    # Each source's reports cover the same steps, and the loop's waits count
    # once over them: within the time they fall in (which once a source would
    # exceed, the loop here doing nothing but wait) and within the loop's own.
    assert 0 < status["wait_s_total"] <= min(status["elapsed_s_total"], waited)
    assert 0 < status["stall_ratio"] <= 1


def test_status_shows_a_budget_epochs_progress(cluster):
    """One dataset's token-budget epoch (takes, not streams) reports too."""
    job = "budget-one-status"
    with cluster.client() as client:
        batches, waited = _timed(client.iter_epoch(
            "web", batch_tokens=BUDGET, token_column="tok", seed=SEED, job=job))
        status = _job_status(client, job)
    rows = sum(len(b) for b in batches)
    [one] = status["sources"]
    assert one["dataset"] == "web" and one["rows_total"] == rows == status["rows_total"]
    assert one["batches_total"] == len(batches) == status["batches_total"]
    assert status["consumers"] == 1
    assert 0 < status["wait_s_total"] <= min(status["elapsed_s_total"], waited)


def test_each_source_epoch_is_planned_once_per_process(cluster, monkeypatch):
    """Fitting the shares, resolving the mixture again (another rank, the
    next epoch) and reading plan each (source, budget, seed, epoch) once."""
    from icefloe import _mixture_budget

    calls: Counter = Counter()
    real = _mixture_budget.plan_epoch

    def counting(lengths, budget, *, seed, epoch):
        rows = len(getattr(lengths, "codes", lengths))  # tells the sources apart
        calls[(rows, budget.batch_tokens, seed, epoch)] += 1
        return real(lengths, budget, seed=seed, epoch=epoch)

    monkeypatch.setattr(_mixture_budget, "plan_epoch", counting)
    seed = SEED + 7  # planned by no other test
    with cluster.client() as client:
        for kw in ({"varlen": True}, {"per_batch": True}):
            for epoch in (0, 1, 1):
                for rank in range(2):
                    assert _epoch(client, seed=seed, epoch=epoch, world_size=2, rank=rank, **kw)
    assert len(calls) > 6 and max(calls.values()) == 1, calls


def test_a_mixture_plans_from_the_codes_of_its_budget(cluster):
    """Each source is planned from its byte-a-row codes made for the job's
    budget (as one dataset), its share included, not from exact lengths."""
    from icefloe._length_codes import LengthCodes

    with as_rank(0, 2):
        for kw in ({"varlen": True}, {"per_batch": True}):
            ds = CacheDataset(cluster.head_uri, WEIGHTS, batch_tokens=BUDGET, token_column="tok",
                              seed=SEED, **kw)
            for source in ds._resolve().sources:
                assert isinstance(source.lengths, LengthCodes), source.name
                assert source.lengths.codes.dtype == np.uint8
                assert source.lengths.batch_tokens == BUDGET
                assert source.generation == source.lengths.generation is not None


@pytest.mark.parametrize("name", list(SOURCES))
def test_codes_made_for_the_budget_plan_a_share_within_it(name):
    """plan_epoch plans a share T_s < T from codes made for T: every batch's
    true padded size within T_s, every row once, and the rows longer than
    T_s dropped exactly where the codes tell them; refused where they cannot."""
    lengths = LENGTHS[name]
    codes = encode_lengths(lengths, BUDGET)
    shares = [int(lengths.max()), 1500, 300, 100, 40]
    if name == "code":  # binned: some shares fall inside a code of rows both sides
        assert not codes.exact
        shares.append(next(s for s in range(20, 400) if not codes.tells(s)))
    for share in shares:
        budget = tb.TokenBudget(share, "tok", too_long="drop")
        if not codes.tells(share):
            with pytest.raises(InvalidArgument, match="cannot tell"):
                tb.plan_epoch(codes, budget, seed=SEED, epoch=0)
            continue
        plan = tb.plan_epoch(codes, budget, seed=SEED, epoch=0)
        rows, counts = plan.rows_of(plan.order)
        assert sorted(rows) == sorted(np.flatnonzero(lengths <= share))
        assert plan.too_long_rows == int((lengths > share).sum())
        for batch in np.split(rows, np.cumsum(counts)[:-1]):
            assert len(batch) * lengths[batch].max() <= share


def test_codes_tell_rows_over_their_budget_only_below_it():
    """Rows longer than the budget the codes were made for share one code:
    a smaller budget tells them (all longer), a larger one cannot."""
    lengths = np.array([5, 20, 50, 2000, 3000] * 100)
    codes = encode_lengths(lengths, 1000)
    assert codes.tells(100) and codes.tells(1000) and not codes.tells(1500)
    plan = tb.plan_epoch(codes, tb.TokenBudget(100, "tok", too_long="drop"), seed=SEED, epoch=0)
    assert plan.too_long_rows == 200
    with pytest.raises(InvalidArgument, match="coded for batch_tokens=1000, not 1500"):
        tb.plan_epoch(codes, tb.TokenBudget(1500, "tok"), seed=SEED, epoch=0)

def test_a_share_its_codes_cannot_tell_plans_from_exact_lengths(cluster):
    """Where a source's codes hold rows on both sides of its share, it is
    planned from its exact lengths: rows longer than the share are counted
    exactly (refused) or dropped, and no other."""
    codes = encode_lengths(LENGTHS["code"], 1000)
    share = next(s for s in range(100, 400) if not codes.tells(s))
    over = int((LENGTHS["code"] > share).sum())
    weights = {"web": (1000 - share) / 1000, "code": share / 1000}  # code's first share

    def dataset(**kw):
        return CacheDataset(cluster.head_uri, weights, batch_tokens=1000, token_column="tok",
                            varlen=True, seed=SEED, **kw)

    with pytest.raises(InvalidArgument, match=rf"source 'code'.* {share} of 1000.* {over} rows"):
        next(iter(dataset()))
    ds = dataset(too_long="drop")
    batch = next(iter(ds))
    [code] = [s for s in ds._resolve().sources if s.name == "code"]
    ids = [i for i in batch["id"].tolist() if _source_of(i) == "code"]
    assert ids and sum(_tokens_of(i) for i in ids) <= code.budget.batch_tokens
