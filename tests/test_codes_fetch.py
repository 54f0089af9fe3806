"""A host's row length codes made once (issue 46, docs/epochs.md section 7,
"Codes"): the first consumer of a host fetches a copy's lengths and codes
them, every other rank and DataLoader worker maps the host's codes file
without fetching them. A real LocalCluster throughout; what the nodes
served is counted from their /metrics, the consumers are real processes,
and a consumer making the codes is SIGKILLed for real."""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import urllib.request
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from iceberg_util import Warehouse

import icefloe
from icefloe import _token_batches as tb

N = 6000
SEED = 4606  # every randomized figure below comes from it
BUDGET = 8192
CONSUMERS = 4


def _data(seed: int) -> pa.Table:
    lengths = np.clip(np.random.default_rng(seed).lognormal(4.5, 1.0, N), 1,
                      BUDGET // 4).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    values = np.repeat(np.arange(N, dtype=np.int32), lengths)
    tokens = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, pa.int32()))
    return pa.table({"id": np.arange(N, dtype=np.int64), "input_ids": tokens})


def _lengths_of(table: pa.Table) -> np.ndarray:
    return np.diff(table.column("input_ids").combine_chunks().offsets.to_numpy())


@pytest.fixture(scope="module")
def tables():
    return [_data(SEED + i) for i in range(3)]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory, tables):
    wh = Warehouse(tmp_path_factory.mktemp("codes-fetch") / "wh")
    return [wh.create(f"t{i}", t).metadata_location for i, t in enumerate(tables)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, warehouse):
    with icefloe.LocalCluster(num_nodes=2,
                              log_dir=tmp_path_factory.mktemp("codes-fetch-logs")) as c:
        with c.client() as client:
            client.load("sft", warehouse[0], batch_rows=500)
        yield c


@pytest.fixture
def codes_dir(tmp_path, monkeypatch):
    """A codes directory of the test's own (the consumers it starts inherit it)."""
    directory = tmp_path / "codes"
    monkeypatch.setenv("ICEFLOE_CODES_DIR", str(directory))
    return directory


_RANGE_ROWS = re.compile(r'^icefloe_node_served_rows_total\{[^}]*ticket="range"[^}]*\} (\S+)$',
                         re.M)


def range_rows_served(cluster) -> float:
    """Rows the nodes served for range tickets (lengths tickets are range
    tickets: a lengths fetch moves it by the rows of the copy)."""
    total = 0.0
    for node in cluster.nodes:
        with urllib.request.urlopen(node.health + "/metrics", timeout=30) as r:
            total += sum(float(v) for v in _RANGE_ROWS.findall(r.read().decode()))
    return total


def _counters() -> dict[str, int]:
    from icefloe import _codes_file

    return dict(vars(_codes_file.counters))


def _moved(before: dict[str, int]) -> dict[str, int]:
    return {k: v - before[k] for k, v in _counters().items()}


def _codes_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("codes-*.u8"))


# -- consumers in processes of their own ---------------------------------------


def _consumer(head_uri: str, barrier, out, rank: int) -> None:
    """One rank of a job of CONSUMERS ranks: its first token-budget batch."""
    with icefloe.Client(head_uri) as client:
        barrier.wait(timeout=120)  # every rank plans at once: first consumers race
        batch = next(iter(client.iter_epoch(
            "sft", batch_tokens=BUDGET, token_column="input_ids", seed=SEED, epoch=0,
            world_size=CONSUMERS, rank=rank)))
        codes = client.row_length_codes("sft", "input_ids", BUDGET)  # the planned ones
        out.put((rank, batch.num_rows, getattr(codes.codes, "filename", None),
                 zlib.crc32(np.ascontiguousarray(codes.codes))))


def test_a_host_s_consumers_fetch_the_lengths_once(cluster, tables, codes_dir):
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(CONSUMERS), ctx.Queue()
    before = range_rows_served(cluster)
    procs = [ctx.Process(target=_consumer, args=(cluster.head_uri, barrier, out, r))
             for r in range(CONSUMERS)]
    for p in procs:
        p.start()
    try:
        got = sorted(out.get(timeout=240) for _ in procs)
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    assert [p.exitcode for p in procs] == [0] * CONSUMERS
    # One consumer fetched the lengths (the copy's rows once), not each of them.
    assert range_rows_served(cluster) - before == N
    want = tb.encode_lengths(_lengths_of(tables[0]), BUDGET).codes
    files = {filename for _, _, filename, _ in got}
    assert len(files) == 1 and None not in files  # every one mapped the one file
    assert {crc for *_, crc in got} == {zlib.crc32(want)}
    assert all(rows > 0 for _, rows, _, _ in got)


def test_a_consumer_maps_the_host_s_codes_without_fetching(cluster, tables, codes_dir):
    before_rows, before = range_rows_served(cluster), _counters()
    with cluster.client() as a:
        made = a.row_length_codes("sft", "input_ids", BUDGET - 1)
    with cluster.client() as b:
        mapped = b.row_length_codes("sft", "input_ids", BUDGET - 1)
    assert range_rows_served(cluster) - before_rows == N  # a fetched, b did not
    assert _moved(before) == {"made": 1, "mapped": 1, "rejected": 0, "wait_timeouts": 0}
    assert isinstance(mapped.codes, np.memmap) and mapped.codes.filename == made.codes.filename
    want = tb.encode_lengths(_lengths_of(tables[0]), BUDGET - 1)
    for got in (made, mapped):  # the whole table, not only the per-row codes
        assert np.array_equal(got.codes, want.codes)
        for field in ("upper", "mean", "mean_sq"):
            assert np.array_equal(getattr(got, field), getattr(want, field)), field
        assert (got.exact, got.longest, got.batch_tokens) == (want.exact, want.longest,
                                                               BUDGET - 1)
    monkeypatch_off = pytest.MonkeyPatch()
    monkeypatch_off.setenv("ICEFLOE_CODES_DIR", "")  # off: each keeps its own
    try:
        with cluster.client() as c:
            private = c.row_length_codes("sft", "input_ids", BUDGET - 1)
        assert not isinstance(private.codes, np.memmap)
        assert np.array_equal(private.codes, want.codes)
    finally:
        monkeypatch_off.undo()


def test_a_dataset_loaded_again_under_its_name_plans_from_its_new_lengths(
        cluster, tables, warehouse, codes_dir):
    """Dropped and loaded again, or loaded over with another table: the same
    name and row count, other lengths; the host's codes of the old copy are
    never mapped for the new one."""
    with cluster.client() as client:
        client.load("again", warehouse[0], batch_rows=500)
    for source, table, drop in ((warehouse[1], tables[1], True),
                                (warehouse[2], tables[2], False)):
        with cluster.client() as client:
            old = client.row_length_codes("again", "input_ids", BUDGET)
            if drop:
                client.evict("again")
            client.load("again", source, batch_rows=500)
        with cluster.client() as client:
            new = client.row_length_codes("again", "input_ids", BUDGET)
            plan = tb.epoch_plan(client, "again", tb.TokenBudget(BUDGET, "input_ids"), SEED, 0)
            assert plan.lengths is new  # what an epoch plans from
        want = tb.encode_lengths(_lengths_of(table), BUDGET).codes
        assert not np.array_equal(old.codes, want)
        assert np.array_equal(new.codes, want)
    with cluster.client() as client:
        client.evict("again")


@pytest.mark.parametrize("damage", ["codes", "truncated", "header", "empty"])
def test_a_damaged_codes_file_is_ignored_and_made_again(cluster, tables, codes_dir, damage):
    with cluster.client() as a:
        a.row_length_codes("sft", "input_ids", BUDGET - 3)
    [path] = _codes_files(codes_dir)
    data = bytearray(path.read_bytes())
    if damage == "codes":  # same size, one code changed
        data[-1] ^= 1
    elif damage == "truncated":
        del data[len(data) // 2:]
    elif damage == "header":
        data[40] ^= 0x20
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    before_rows, before = range_rows_served(cluster), _counters()
    with cluster.client() as b:
        again = b.row_length_codes("sft", "input_ids", BUDGET - 3)
    moved = _moved(before)
    assert moved["made"] == 1 and moved["rejected"] >= 1 and moved["mapped"] == 0
    assert range_rows_served(cluster) - before_rows == N
    want = tb.encode_lengths(_lengths_of(tables[0]), BUDGET - 3).codes
    assert np.array_equal(again.codes, want)
    # Made again in its place: the next consumer maps it, fetching nothing.
    before_rows, before = range_rows_served(cluster), _counters()
    with cluster.client() as c:
        mapped = c.row_length_codes("sft", "input_ids", BUDGET - 3)
    assert _moved(before)["mapped"] == 1 and range_rows_served(cluster) == before_rows
    assert np.array_equal(mapped.codes, want)
    assert _codes_files(codes_dir) == [path]


# -- a consumer that stalls or dies while it makes the codes ------------------


def _stalled_maker(head_uri: str, out) -> None:
    """A consumer that stops for good once it starts fetching the lengths
    (so it holds the host's lock for the codes)."""
    import threading

    def stall(*args, **kwargs):
        out.put("fetching")
        threading.Event().wait()

    icefloe.Client._fetch_lengths = stall
    with icefloe.Client(head_uri) as client:
        client.row_length_codes("sft", "input_ids", BUDGET - 5)


def _start_stalled_maker(cluster):
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_stalled_maker, args=(cluster.head_uri, out))
    proc.start()
    assert out.get(timeout=120) == "fetching"
    return proc


def test_a_consumer_killed_while_making_the_codes_does_not_hold_the_others(
        cluster, tables, codes_dir, monkeypatch):
    monkeypatch.setenv("ICEFLOE_CODES_WAIT_S", "120")  # bounded: a hang fails, not blocks
    proc = _start_stalled_maker(cluster)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=60)
    assert proc.exitcode == -signal.SIGKILL
    before = _counters()
    with cluster.client() as client:
        codes = client.row_length_codes("sft", "input_ids", BUDGET - 5)
    # The dead consumer's lock went with it: taken at once, not waited out.
    assert _moved(before) == {"made": 1, "mapped": 0, "rejected": 0, "wait_timeouts": 0}
    assert np.array_equal(codes.codes,
                          tb.encode_lengths(_lengths_of(tables[0]), BUDGET - 5).codes)
    assert isinstance(codes.codes, np.memmap)


def test_a_consumer_stalled_making_the_codes_is_waited_for_a_bounded_time(
        cluster, tables, codes_dir, monkeypatch):
    monkeypatch.setenv("ICEFLOE_CODES_WAIT_S", "0.5")
    proc = _start_stalled_maker(cluster)
    try:
        before = _counters()
        with cluster.client() as client:
            codes = client.row_length_codes("sft", "input_ids", BUDGET - 5)
        # Waited out, then made its own (and published them for the others).
        assert _moved(before) == {"made": 1, "mapped": 0, "rejected": 0, "wait_timeouts": 1}
        assert np.array_equal(codes.codes,
                              tb.encode_lengths(_lengths_of(tables[0]), BUDGET - 5).codes)
        assert isinstance(codes.codes, np.memmap)
    finally:
        proc.kill()
        proc.join(timeout=60)


def test_a_wait_that_is_not_a_number_of_seconds_is_refused(cluster, codes_dir, monkeypatch):
    for bad in ("soon", "-1", "nan", "inf"):
        monkeypatch.setenv("ICEFLOE_CODES_WAIT_S", bad)
        with cluster.client() as client:
            with pytest.raises(ValueError, match=f"ICEFLOE_CODES_WAIT_S={bad!r}"):
                client.row_length_codes("sft", "input_ids", BUDGET - 7)


# -- the codes file alone ------------------------------------------------------


def _key(generation: int, rows: int = 50_000):
    from icefloe._codes_file import CodesKey

    return CodesKey(head="grpc://127.0.0.1:1", dataset="sft", generation=generation,
                    column="input_ids", rows=rows, batch_tokens=BUDGET)


def _made_codes(seed: int, rows: int = 50_000):
    lengths = np.random.default_rng(seed).integers(1, 900, rows).astype(np.uint16)
    return tb.encode_lengths(lengths, BUDGET)


def test_a_codes_file_of_another_key_under_its_name_is_not_mapped(codes_dir):
    """Found by its name alone, a file is another copy's where its header
    names another key (here: the previous generation's file, renamed)."""
    from icefloe._codes_file import host_codes

    old, new = _made_codes(1), _made_codes(2)
    mapped = host_codes(_key(1), lambda: old)
    Path(mapped.codes.filename).rename(codes_dir / _key(2).file_name())
    before = _counters()
    got = host_codes(_key(2), lambda: new)
    assert _moved(before) == {"made": 1, "mapped": 0, "rejected": 2, "wait_timeouts": 0}
    assert np.array_equal(got.codes, new.codes) and isinstance(got.codes, np.memmap)


def test_the_codes_directory_keeps_the_latest_files(codes_dir):
    from icefloe._codes_file import _MAX_SHARED_FILES, host_codes

    codes = _made_codes(3, rows=1000)
    for generation in range(1, _MAX_SHARED_FILES + 4):
        got = host_codes(_key(generation, rows=1000), lambda: codes)
        os.utime(got.codes.filename, (generation, generation))  # made in this order
    kept = {p.name for p in _codes_files(codes_dir)}
    assert kept == {_key(g, rows=1000).file_name()
                    for g in range(4, _MAX_SHARED_FILES + 4)}
    assert len(list(codes_dir.glob(".codes-*.lock"))) <= _MAX_SHARED_FILES


def test_a_child_forked_while_the_lock_is_held_does_not_keep_it(codes_dir, monkeypatch):
    """flock belongs to the open file, which fork shares: a child forked
    while a consumer makes the codes must not hold their lock once the
    consumer is done."""
    from icefloe import _codes_file

    monkeypatch.setenv("ICEFLOE_CODES_WAIT_S", "5")  # bounded: a kept lock is a timeout
    codes_dir.mkdir()
    lock = codes_dir / ".codes-test.lock"
    with _codes_file._single_flight(lock) as held:
        assert held
        child = os.fork()
        if child == 0:  # the child only waits to be killed
            signal.pause()
            os._exit(0)
    try:
        before = _counters()
        with _codes_file._single_flight(lock) as again:
            assert again
        assert _moved(before)["wait_timeouts"] == 0
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
