"""The cache cluster: loading, placement, reading, eviction, budgets, security, failures."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from iceberg_util import Warehouse, assert_same_rows

import icefloe


def rows(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "x": ids.astype(np.float64) * 0.5,
                     "s": pa.array([f"s{i}" for i in ids])})


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    wh = Warehouse(tmp_path_factory.mktemp("wh"))
    table = wh.create("multi", rows(2000))
    for k in range(1, 6):  # six files of 2000 rows
        table.append(rows(2000, start=k * 2000))
    wh.create("other", rows(500, start=100_000))
    return wh


@pytest.mark.parametrize("num_nodes", [1, 2, 3])
def test_load_and_read_matches_pyiceberg(warehouse, tmp_path, num_nodes):
    table = warehouse.table("multi")
    with icefloe.LocalCluster(num_nodes=num_nodes, log_dir=tmp_path) as cluster:
        with cluster.client() as client:
            desc = client.load("multi", table.metadata_location, batch_rows=700)
            assert desc["rows"] == 12_000
            assert_same_rows(client.read("multi"), table.scan().to_arrow())
            # Dense, contiguous global row ids, in slices covering [0, N).
            slices = client.describe("multi")["slices"]
            assert slices[0]["start"] == 0 and slices[-1]["stop"] == 12_000
            for a, b in zip(slices, slices[1:], strict=False):
                assert a["stop"] == b["start"]
            # Balanced within one file's size (2000 rows) across nodes.
            per_node: dict[str, int] = {}
            for s in slices:
                per_node[s["nodes"][0]] = per_node.get(s["nodes"][0], 0) + s["stop"] - s["start"]
            assert len(per_node) == num_nodes
            assert max(per_node.values()) - min(per_node.values()) <= 2000
            # Any sub-range reads exactly those rows, in global order.
            whole = client.read("multi")
            for start, stop in [(0, 1), (1999, 2001), (3500, 9000), (11_999, 12_000)]:
                assert client.read("multi", start, stop).equals(whole.slice(start, stop - start))
            # Batches are at most batch_size rows.
            info = client.flight_info("multi")
            reader = client.node(info.endpoints[0].locations[0].uri.decode()).do_get(
                info.endpoints[0].ticket, options=client.call_options())
            assert max(len(c) for c in reader.read_all().column(0).chunks) <= 700


def test_two_datasets_evict_frees_memory_and_reload_is_reused(warehouse, tmp_path):
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path) as cluster, cluster.client() as c:
        a = c.load("a", warehouse.table("multi").metadata_location)
        b = c.load("b", warehouse.table("other").metadata_location)
        assert {d["name"] for d in c.datasets()} == {"a", "b"}
        used = sum(n["memory_used_bytes"] for n in c.status()["nodes"])
        assert used >= a["bytes"] + b["bytes"] > 0
        again = c.load("a", warehouse.table("multi").metadata_location)
        assert again["generation"] == a["generation"]  # reused, not reloaded
        c.evict("a")
        after = sum(n["memory_used_bytes"] for n in c.status()["nodes"])
        assert after <= used - a["bytes"]
        assert [d["name"] for d in c.datasets()] == ["b"]
        with pytest.raises(icefloe.NotFound, match="'a'"):
            c.read("a")
        assert c.read("b").num_rows == 500


def test_an_alias_keeps_its_copy_when_the_name_it_shares_is_reloaded(tmp_path):
    # "b" shares "a"'s copy; "a" is then reloaded at a newer snapshot. Nodes
    # hold one generation per storage name, so the new copy must not replace
    # the one "b" reads (it did: b's reads failed with a stale ticket).
    table = Warehouse(tmp_path / "wh").create("t", rows(100))
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path / "logs") as cluster, \
            cluster.client() as c:
        a = c.load("a", table.metadata_location)
        b = c.load("b", table.metadata_location)
        assert b["generation"] == a["generation"]
        old = table.scan().to_arrow()
        table.append(rows(50, start=100))
        a2 = c.load("a", table.metadata_location)
        assert a2["generation"] != a["generation"] and a2["rows"] == 150
        assert_same_rows(c.read("a"), table.scan().to_arrow())
        assert_same_rows(c.read("b"), old)
        assert c.describe("b")["generation"] == a["generation"]
        # Evicting the alias frees the old copy on every node.
        c.evict("b")
        held = {(d["name"], d["generation"]) for n in c.status()["nodes"] for d in n["datasets"]}
        assert all(g == a2["generation"] for _, g in held), held
        assert_same_rows(c.read("a"), table.scan().to_arrow())


def test_load_beyond_budget_is_refused_before_loading(warehouse, tmp_path):
    with icefloe.LocalCluster(num_nodes=2, memory_limit="64KiB", log_dir=tmp_path) as cluster:
        with cluster.client() as c:
            with pytest.raises(icefloe.OutOfMemory, match="needs .* available"):
                c.load("big", warehouse.table("multi").metadata_location)
            assert all(n["memory_used_bytes"] == 0 for n in c.status()["nodes"])
            assert c.datasets() == []


def test_token_auth_and_signed_tickets(warehouse, tmp_path):
    with icefloe.LocalCluster(num_nodes=1, token="s3cret", log_dir=tmp_path) as cluster:
        with cluster.client() as c:
            c.load("t", warehouse.table("other").metadata_location)
            info = c.flight_info("t")
            ticket = info.endpoints[0].ticket.ticket
            node_uri = info.endpoints[0].locations[0].uri.decode()
        for token in (None, "wrong"):
            with icefloe.Client(cluster.head_uri, token=token) as bad:
                with pytest.raises(icefloe.Unauthenticated):
                    bad.datasets()
        node = flight.connect(node_uri)
        with pytest.raises(flight.FlightUnauthenticatedError):
            node.do_get(flight.Ticket(ticket)).read_all()
        good = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer s3cret")])
        assert node.do_get(flight.Ticket(ticket), options=good).read_all().num_rows == 500
        # A ticket with one flipped bit (anywhere) is rejected.
        for bit in random.Random(7).sample(range(len(ticket) * 8), 24):
            forged = bytearray(ticket)
            forged[bit // 8] ^= 1 << (bit % 8)
            with pytest.raises(pa.ArrowInvalid):
                node.do_get(flight.Ticket(bytes(forged)), options=good).read_all()
        # Node-internal actions are refused to anyone but the head.
        body = json.dumps({"v": 1, "dataset": "t"}).encode()
        with pytest.raises(flight.FlightUnauthorizedError):
            list(node.do_action(flight.Action("node.evict", body), options=good))


def test_tls(warehouse, tmp_path):
    with icefloe.LocalCluster(num_nodes=1, tls=True, log_dir=tmp_path) as cluster:
        assert cluster.head_uri.startswith("grpc+tls://")
        with cluster.client() as c:
            c.load("t", warehouse.table("other").metadata_location)
            assert c.read("t").num_rows == 500
        plain = flight.connect(cluster.head_uri.replace("grpc+tls://", "grpc://"))
        with pytest.raises(flight.FlightUnavailableError):
            list(plain.list_flights(options=flight.FlightCallOptions(timeout=5)))


def test_bad_input_keeps_the_cluster_serving(warehouse, tmp_path):
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path) as cluster, cluster.client() as c:
        c.load("good", warehouse.table("other").metadata_location)
        with pytest.raises(icefloe.NotFound):
            c.read("missing")
        with pytest.raises(icefloe.InvalidArgument, match="outside"):
            c.read("good", 0, 501)
        with pytest.raises(icefloe.Error):
            c.load("nothing", str(tmp_path / "no-such-table"))
        node = c.node(cluster.node_uris[0])
        rng = random.Random(1234)
        for _ in range(200):  # fuzzed ticket bytes
            junk = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
            with pytest.raises((pa.ArrowInvalid, pa.ArrowKeyError, pa.ArrowNotImplementedError)):
                node.do_get(flight.Ticket(junk)).read_all()
        assert c.read("good").num_rows == 500
        with urllib.request.urlopen(cluster.head.health + "/ready", timeout=10) as resp:
            assert resp.read() == b"ready"


def test_node_dying_during_load_is_a_clear_error(warehouse, tmp_path):
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path,
                              head_args=["--heartbeat-timeout-ms", "1000"]) as cluster:
        with cluster.client() as c:
            c.load("keep", warehouse.table("other").metadata_location)
            cluster.kill_node(1)
            with pytest.raises(icefloe.Error, match="node"):
                c.load("lost", warehouse.table("multi").metadata_location)
            # The surviving node still serves what it holds.
            survivors = [s for s in c.describe("keep")["slices"]
                         if s["nodes"][0] == cluster.node_uris[0]]
            for s in survivors:
                assert c.read("keep", s["start"], s["stop"]).num_rows == s["stop"] - s["start"]
            # The dead node is out of the placement now: loading again works.
            again = c.load("lost", warehouse.table("multi").metadata_location)
            assert again["rows"] == 12_000
            assert {n for s in again["slices"] for n in s["nodes"]} == {cluster.node_uris[0]}


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return any(line.split()[1:2] == ["Z"] for line in f if line.startswith("State:"))
    except FileNotFoundError:
        return True


def test_servers_exit_when_the_cluster_owner_is_killed(tmp_path):
    # A process that starts a LocalCluster and is then SIGKILLed cannot stop it:
    # the servers notice they lost their parent and shut down by themselves.
    code = ("import icefloe, json, sys, time\n"
            f"c = icefloe.LocalCluster(num_nodes=1, log_dir={str(tmp_path)!r}).start()\n"
            "print(json.dumps([c.head.popen.pid] + [n.popen.pid for n in c.nodes]), flush=True)\n"
            "time.sleep(600)\n")
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        pids = json.loads(owner.stdout.readline())
        assert len(pids) == 2 and not any(_gone(p) for p in pids)
    finally:
        owner.kill()
        owner.wait(timeout=30)
    deadline = time.monotonic() + 20
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all(_gone(p) for p in pids), "servers outlived the process that started them"
    logs = "".join(p.read_text() for p in tmp_path.glob("*.log"))
    assert "parent process is gone" in logs
