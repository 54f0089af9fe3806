"""Kubeflow Trainer's data-cache contract, exercised by a client written from it.

The servers run as `head` and `worker` (symlinks to icefloe-head/icefloe-node,
as in the image) with Kubeflow's environment; the client below follows
shared/design/kubeflow-compat.md: PATH descriptors [index, total], varint
tickets, sequential DoGet per endpoint, re-chunking to 128 rows and an
overridable from_arrow_rb_to_tensor hook.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from iceberg_util import Warehouse

import icefloe
from icefloe._bin import bin_path
from icefloe._process import ServerProcess

ROWS = 1000


def encode_varint(v: int) -> bytes:
    if v <= 250:
        return bytes([v])
    if v <= 0xFFFF:
        return b"\xfb" + v.to_bytes(2, "little")
    if v <= 0xFFFFFFFF:
        return b"\xfc" + v.to_bytes(4, "little")
    return b"\xfd" + v.to_bytes(8, "little")


class KubeflowStyleDataset:
    """The Kubeflow example's reading loop, from the contract."""

    def __init__(self, head: str, world_size: int, rank: int, num_workers: int, worker: int,
                 seed: int = 0, batch_size: int = 128) -> None:
        self.head = head
        self.total = num_workers * world_size
        self.index = (worker * world_size + rank + seed) % self.total
        self.batch_size = batch_size

    def from_arrow_rb_to_tensor(self, chunk: pa.RecordBatch):
        yield {"id": np.asarray(chunk.column("id"))}

    def __iter__(self):
        client = flight.connect(self.head)
        info = client.get_flight_info(
            flight.FlightDescriptor.for_path(str(self.index), str(self.total)))
        for endpoint in info.endpoints:
            reader = flight.connect(endpoint.locations[0].uri.decode()).do_get(endpoint.ticket)
            for batch in reader:
                rb = batch.data
                for start in range(0, rb.num_rows, self.batch_size):
                    yield from self.from_arrow_rb_to_tensor(rb.slice(start, self.batch_size))


@contextlib.contextmanager
def kubeflow_cluster(root, table, head_env: dict[str, str] | None = None):
    """Two Kubeflow workers and their head, started as the cache image starts
    them, caching `table` (the head's environment plus `head_env`); yields
    (head, workers)."""
    bindir = root / "bin"
    bindir.mkdir()
    os.symlink(bin_path("icefloe-head"), bindir / "head")
    os.symlink(bin_path("icefloe-node"), bindir / "worker")
    # The leader is this host: workers without a cluster secret take node
    # actions from their leader's address only (ICEFLOE_NODES names them, so
    # the head does not use the leader name to find them).
    env = {**os.environ, "METADATA_LOC": table.metadata_location, "SCHEMA_NAME": "db",
           "TABLE_NAME": "t", "LWS_LEADER_ADDRESS": "localhost",
           "LWS_GROUP_SIZE": "3", "HEALTH_PORT": "0"}
    procs: list[ServerProcess] = []
    try:
        for i in range(2):
            procs.append(ServerProcess(name=f"worker-{i}", argv=[str(bindir / "worker"),
                                       "127.0.0.1", "0"], log_path=root / f"w{i}.log",
                                       env=env).start())
        nodes = ",".join(p.location for p in procs)
        head = ServerProcess(name="head", argv=[str(bindir / "head"), "127.0.0.1", "0"],
                             log_path=root / "head.log",
                             env={**env, "ICEFLOE_NODES": nodes, **(head_env or {})}).start()
        procs.append(head)
        wait_ready(head.health, 60)
        yield head, procs[:2]
    finally:
        for p in procs:
            p.stop()


@pytest.fixture(scope="module")
def kubeflow_cache(tmp_path_factory):
    root = tmp_path_factory.mktemp("kubeflow")
    wh = Warehouse(root / "wh")
    ids = np.arange(ROWS, dtype=np.int64)
    table = wh.create("t", pa.table({"id": ids[:400], "v": ids[:400] * 2.0}))
    table.append(pa.table({"id": ids[400:700], "v": ids[400:700] * 2.0}))
    table.append(pa.table({"id": ids[700:], "v": ids[700:] * 2.0}))
    with kubeflow_cluster(root, table) as (head, workers):
        yield head, workers, table


def wait_ready(health: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(health + "/ready", timeout=5) as resp:
                if resp.status == 200:
                    return
        except urllib.error.HTTPError as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"not ready: {exc.read().decode()}") from exc
        time.sleep(0.05)


def test_every_row_exactly_once_across_ranks_and_workers(kubeflow_cache):
    head, _, _ = kubeflow_cache
    for world_size in (1, 2, 3, 4):
        for num_workers in (1, 2, 3):
            for seed in (0, 5):
                total = world_size * num_workers
                per = -(-ROWS // total)
                seen: list[int] = []
                for rank in range(world_size):
                    for worker in range(num_workers):
                        ds = KubeflowStyleDataset(head.location, world_size, rank, num_workers,
                                                  worker, seed)
                        if ds.index * per >= ROWS:
                            with pytest.raises(pa.ArrowInvalid, match="Invalid partition range"):
                                list(ds)
                            continue
                        chunks = list(ds)
                        assert all(len(c["id"]) <= 128 for c in chunks)
                        got = np.concatenate([c["id"] for c in chunks]).tolist()
                        first = ds.index * per
                        assert len(got) == min(first + per, ROWS) - first
                        seen += got
                assert sorted(seen) == list(range(ROWS)), (world_size, num_workers, seed)


def decode_varint(data: bytes, at: int) -> tuple[int, int]:
    size = {0xFB: 2, 0xFC: 4, 0xFD: 8}.get(data[at], 0)
    if size == 0:
        return data[at], at + 1
    return int.from_bytes(data[at + 1:at + 1 + size], "little"), at + 1 + size


def test_flight_info_and_tickets_follow_the_contract(kubeflow_cache):
    # One endpoint per slice of the shard: its ticket is that slice's part of
    # the shard (same encoding, narrower bounds), its locations the slice's
    # replicas. Kubeflow's client (DoGet endpoint.ticket on locations[0],
    # endpoints in order) so reads exactly its shard.
    head, workers, _ = kubeflow_cache
    client = flight.connect(head.location)
    info = client.get_flight_info(flight.FlightDescriptor.for_path("1", "4"))
    assert len(info.endpoints) >= 1
    next_row = 250
    rows = []
    for e in info.endpoints:
        start, at = decode_varint(e.ticket.ticket, 0)
        end, at = decode_varint(e.ticket.ticket, at)
        assert at == len(e.ticket.ticket)
        assert start == next_row and start <= end <= 499  # in order, no gap, no overlap
        next_row = end + 1
        assert e.app_metadata == e.ticket.ticket
        assert len(e.locations) >= 1
        assert {loc.uri.decode() for loc in e.locations} <= {w.location for w in workers}
        reader = flight.connect(e.locations[0].uri.decode()).do_get(e.ticket)
        got = reader.read_all().column("id").to_pylist()
        assert got == list(range(start, end + 1))
        rows += got
    assert next_row == 500
    assert rows == list(range(250, 500))
    assert "id" in info.schema.names and "v" in info.schema.names
    # The whole shard's ticket (as Kubeflow's own cache hands out) still
    # works: each worker returns the rows of the range it holds.
    rows = []
    for w in workers:
        t = flight.connect(w.location).do_get(flight.Ticket(b"\x00\x18")).read_all()
        rows += t.column("id").to_pylist()
    assert len(rows) == 25 and len(set(rows)) == 25


@pytest.mark.parametrize("path, message", [
    ((), "Missing local_rank in path"),
    (("0",), "Missing total in path"),
    (("x", "2"), "Invalid local_rank value"),
    (("0", "y"), "Invalid total value"),
    (("0", "0"), "Invalid partition range"),
    (("5", "5"), "Invalid partition range"),
])
def test_errors_as_the_contract_words_them(kubeflow_cache, path, message):
    head, _, _ = kubeflow_cache
    with pytest.raises(pa.ArrowInvalid, match=message):
        flight.connect(head.location).get_flight_info(flight.FlightDescriptor.for_path(*path))


def test_bad_ticket_and_worker_readiness(kubeflow_cache):
    _, workers, _ = kubeflow_cache
    for w in workers:
        with urllib.request.urlopen(w.health + "/ready", timeout=5) as resp:
            assert resp.read() == b"ready"
        with pytest.raises(pa.ArrowInvalid, match="Invalid ticket format"):
            flight.connect(w.location).do_get(flight.Ticket(b"\xfe\x01")).read_all()


def test_head_fails_loudly_on_a_missing_table(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(bin_path("icefloe-head"), bindir / "head")
    os.symlink(bin_path("icefloe-node"), bindir / "worker")
    env = {**os.environ, "METADATA_LOC": str(tmp_path / "nope.metadata.json"),
           "LWS_LEADER_ADDRESS": "localhost", "LWS_GROUP_SIZE": "2", "HEALTH_PORT": "0",
           "ICEFLOE_STARTUP_TIMEOUT": "2"}
    worker = ServerProcess(name="w", argv=[str(bindir / "worker"), "127.0.0.1", "0"],
                           log_path=tmp_path / "w.log", env=env).start()
    try:
        head = ServerProcess(name="head", argv=[str(bindir / "head"), "127.0.0.1", "0"],
                             log_path=tmp_path / "h.log",
                             env={**env, "ICEFLOE_NODES": worker.location}).start()
        code = head.popen.wait(timeout=60)
        assert code != 0
        assert "nope.metadata.json" in Path(tmp_path / "h.log").read_text()
        head.stop()
    finally:
        worker.stop()


def test_workers_take_node_actions_from_their_leader_only(tmp_path):
    # Kubeflow starts the cache with no secret; a worker then accepts node
    # actions only from LWS_LEADER_ADDRESS's addresses (the accepting side is
    # the fixture above: its head loads through its workers). Here the
    # leader is 127.0.0.2, so this process (127.0.0.1) is refused.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(bin_path("icefloe-node"), bindir / "worker")
    env = {**os.environ, "METADATA_LOC": str(tmp_path / "t.metadata.json"),
           "LWS_LEADER_ADDRESS": "127.0.0.2", "LWS_GROUP_SIZE": "2", "HEALTH_PORT": "0"}
    worker = ServerProcess(name="w", argv=[str(bindir / "worker"), "127.0.0.1", "0"],
                           log_path=tmp_path / "w.log", env=env).start()
    try:
        with flight.connect(worker.location) as c:
            for kind in ("node.status", "node.evict", "node.load"):
                with pytest.raises(flight.FlightUnauthorizedError,
                                   match="only accepted from 127.0.0.2"):
                    list(c.do_action(flight.Action(kind, b'{"v": 1, "dataset": "x"}')))
    finally:
        worker.stop()


def logfmt_lines(path: Path, msg: str) -> list[dict[str, str]]:
    """The structured log lines of `path` whose msg is `msg`, as dicts."""
    out = []
    for line in path.read_text().splitlines():
        fields = {k: v.strip('"') for k, v in re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', line)}
        if fields.get("msg") == msg:
            out.append(fields)
    return out


def ready_body(health: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(health + "/ready", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_head_says_at_once_which_worker_refuses_its_node_actions_and_why(tmp_path):
    # Workers without a cluster secret take node actions from their leader's
    # addresses only. Worker 1's leader is another address (the head's
    # connections come from 127.0.0.1), worker 2's leader name does not
    # resolve: both refuse the head, which must say so at once, naming the
    # worker and its reason, in /ready and (once per worker per reason) in
    # its log, and keep asking with backoff until they accept.
    table = Warehouse(tmp_path / "wh").create("t", pa.table({"id": np.arange(100)}))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(bin_path("icefloe-head"), bindir / "head")
    os.symlink(bin_path("icefloe-node"), bindir / "worker")
    env = {**os.environ, "METADATA_LOC": table.metadata_location, "LWS_LEADER_ADDRESS": "localhost",
           "LWS_GROUP_SIZE": "4", "HEALTH_PORT": "0"}
    leaders = ["localhost", "127.0.0.2", "no-such-leader.invalid"]

    def start_worker(i: int, leader: str, port: int = 0) -> ServerProcess:
        return ServerProcess(name=f"w{i}", argv=[str(bindir / "worker"), "127.0.0.1", str(port)],
                             log_path=tmp_path / f"w{i}-{leader}.log",
                             env={**env, "LWS_LEADER_ADDRESS": leader}).start()

    workers = [start_worker(i, leader) for i, leader in enumerate(leaders)]
    head = None
    try:
        head = ServerProcess(name="head", argv=[str(bindir / "head"), "127.0.0.1", "0"],
                             log_path=tmp_path / "head.log",
                             env={**env, "ICEFLOE_NODES": ",".join(w.location for w in workers),
                                  "ICEFLOE_STARTUP_TIMEOUT": "120"}).start()
        started = time.monotonic()
        while True:
            code, body = ready_body(head.health)
            if workers[1].location in body and workers[2].location in body:
                break
            assert time.monotonic() - started < 5, f"/ready does not say why: {code} {body}"
            time.sleep(0.05)
        assert code == 503
        assert f"node {workers[1].location} refuses this head's node actions" in body
        assert "only accepted from 127.0.0.2" in body and "came from 127.0.0.1" in body
        assert f"node {workers[2].location} refuses this head's node actions" in body
        assert "no-such-leader.invalid" in body and "does not resolve" in body
        assert workers[0].location not in body

        # A few polls later still one line per refusing worker (and reason).
        while time.monotonic() - started < 4:
            time.sleep(0.2)
        refusals = logfmt_lines(tmp_path / "head.log", "node refuses the head's node actions")
        assert sorted(r["node"] for r in refusals) == sorted(w.location for w in workers[1:])
        # The worker's own words (which address it expects, which it saw).
        assert all(r["reason"].startswith("action 'node.status' is only accepted from ")
                   and r["reason"].endswith("but the call came from 127.0.0.1")
                   for r in refusals), refusals
        for w, leader in zip(workers[1:], leaders[1:], strict=True):
            said = logfmt_lines(tmp_path / f"w{workers.index(w)}-{leader}.log",
                                "refused the head's node actions")
            assert len(said) == 1, said
            assert said[0]["leader"] == leader and said[0]["seen"] == "127.0.0.1"
            assert said[0]["expected"] == ("127.0.0.2" if leader == "127.0.0.2" else "")

        # The cause gone (workers restarted on their ports with the right
        # leader), the head loads and is ready: it kept asking.
        for i in (1, 2):
            port = int(workers[i].location.rsplit(":", 1)[1])
            workers[i].stop()
            workers[i] = start_worker(i, "localhost", port)
        wait_ready(head.health, 60)
        assert logfmt_lines(tmp_path / "head.log", "node accepts the head's node actions again")
    finally:
        for p in ([head] if head else []) + workers:
            p.stop()


def test_kubeflow_shards_read_the_refreshed_copy(tmp_path):
    """A refresh stores the new copy beside the old one (`name@generation`);
    the workers' Kubeflow tickets read whichever the head published last."""
    ids = np.arange(ROWS, dtype=np.int64)
    table = Warehouse(tmp_path / "wh").create("t", pa.table({"id": ids[:600],
                                                             "v": ids[:600] * 2.0}))
    with kubeflow_cluster(tmp_path, table) as (head, _):
        with icefloe.Client(head.location) as client:
            name = client.status()["default_dataset"]
            before = client.describe(name)
            table.append(pa.table({"id": ids[600:], "v": ids[600:] * 2.0}))
            desc = client.refresh(name)
            assert desc["rows"] == ROWS and desc["refresh"]["tasks_reused"] == 1
            assert desc["generation"] > before["generation"]
        for world_size in (1, 3):
            seen: list[int] = []
            for rank in range(world_size):
                ds = KubeflowStyleDataset(head.location, world_size, rank, 1, 0)
                seen += np.concatenate([c["id"] for c in ds]).tolist()
            assert sorted(seen) == list(range(ROWS)), world_size


def test_a_transform_naming_a_tokenizer_json_serves_input_ids_and_attention_mask(tmp_path):
    """Kubeflow's notebook tokenizes the reviews with distilbert-base-uncased,
    padding="max_length", max_length=128, truncation=True. A head started
    with ICEFLOE_TRANSFORM naming that tokenizer.json (BERT-base-uncased: the
    same ids) serves exactly those input_ids and attention_mask, read by the
    contract's own loop and by DataCacheDataset."""
    tk = pytest.importorskip("tokenizers")
    torch = pytest.importorskip("torch")
    from fetch_tokenizers import bert_uncased

    from icefloe.torch import DataCacheDataset

    try:
        bert = str(bert_uncased())
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"the BERT-base-uncased tokenizer.json cannot be fetched: {e}")
    texts = ["", "Great blender, works as advertised!", "Terrible. " * 200,
             "Ünïcödé café 東京 👍🏽 [SEP] x"] * 75
    table = Warehouse(tmp_path / "wh").create("t", pa.table({
        "id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, pa.string()),
        "stars": pa.array([1 + i % 5 for i in range(len(texts))], pa.int32())}))
    n = 128
    spec = {"keep": ["id"], "columns": [
        {"name": "labels", "expr": "stars - 1"},
        {"name": "input_ids", "tokenize": {"column": "text", "model": bert, "max_tokens": n,
                                           "pad_to": n}}]}
    ref = tk.Tokenizer.from_file(bert)
    ref.enable_truncation(max_length=n)
    ref.enable_padding(length=n, pad_id=0)
    want = ref.encode_batch(texts)

    class Tokens(KubeflowStyleDataset):
        def from_arrow_rb_to_tensor(self, chunk: pa.RecordBatch):
            yield {name: np.asarray(chunk.column(name).flatten()).reshape(chunk.num_rows, -1)
                   for name in ("input_ids", "attention_mask")} | \
                {"id": np.asarray(chunk.column("id"))}

    with kubeflow_cluster(tmp_path, table, {"ICEFLOE_TRANSFORM": json.dumps(spec)}) as (head, _):
        contract = list(Tokens(head.location, world_size=1, rank=0, num_workers=1, worker=0))
        ours = list(DataCacheDataset(head.location, batch_size=32))
    for chunks, to_list in [(contract, lambda a: a.tolist()), (ours, lambda t: t.tolist())]:
        rows = 0
        for c in chunks:
            assert c["input_ids"].shape == (len(c["id"]), n)
            for i, row in enumerate(to_list(c["id"])):
                assert to_list(c["input_ids"][i]) == want[row].ids
                assert to_list(c["attention_mask"][i]) == want[row].attention_mask
            rows += len(c["id"])
        assert rows == len(texts)
    assert ours[0]["input_ids"].dtype == torch.int32
    assert ours[0]["attention_mask"].dtype == torch.int8
    assert ours[0]["labels"].tolist() == [(1 + i % 5) - 1 for i in ours[0]["id"].tolist()]
