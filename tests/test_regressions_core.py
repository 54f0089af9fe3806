"""Regression tests for the cases of issue 13 ("What went wrong").

Each drives a real LocalCluster (and, where a misbehaving data node is
needed, a fake node written with pyarrow.flight) and asserts a precise error
naming the field, a head that keeps serving, and data that still reads back.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from iceberg_util import Warehouse

import icefloe


def rows(n: int, start: int = 0) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({"id": ids, "x": ids.astype(np.float64)})


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    wh = Warehouse(tmp_path_factory.mktemp("wh"))
    t = wh.create("t", rows(300))
    t.append(rows(300, start=300))
    return wh


@pytest.fixture(scope="module")
def cluster(warehouse, tmp_path_factory):
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path_factory.mktemp("c")) as c:
        with c.client() as client:
            client.load("good", warehouse.table("t").metadata_location)
        yield c


def secret_of(cluster: icefloe.LocalCluster) -> bytes:
    return Path(cluster.log_dir, "secrets", "cluster-secret").read_bytes().strip()


def signed_action(cluster, location: str, kind: str, body: dict | str) -> list[bytes]:
    payload = (body if isinstance(body, str) else json.dumps(body)).encode()
    sig = hmac.new(secret_of(cluster), kind.encode() + b"\n" + payload, hashlib.sha256)
    options = flight.FlightCallOptions(timeout=30, headers=[
        (b"x-icefloe-signature", sig.hexdigest().encode())])
    with flight.connect(location) as c:
        return [r.body.to_pybytes() for r in c.do_action(flight.Action(kind, payload), options)]


def head_action(cluster, kind: str, body: str) -> list[bytes]:
    with flight.connect(cluster.head_uri) as c:
        return [r.body.to_pybytes() for r in c.do_action(flight.Action(kind, body.encode()))]


def head_info(cluster, cmd: str) -> flight.FlightInfo:
    with flight.connect(cluster.head_uri) as c:
        return c.get_flight_info(flight.FlightDescriptor.for_command(cmd.encode()))


def assert_still_serving(cluster) -> None:
    with cluster.client() as c:
        assert sorted(c.read("good").column("id").to_pylist()) == list(range(600))
        assert c.status()["ready"]
    with urllib.request.urlopen(cluster.head.health + "/metrics", timeout=10) as resp:
        assert resp.status == 200
    assert cluster.head.alive() and all(n.alive() for n in cluster.nodes)


# -- UNKNOWN errors instead of a precise InvalidArgument -------------------------


@pytest.mark.parametrize("kind", ["describe", "evict"])
def test_non_string_name_is_invalid_naming_name(cluster, kind):
    with pytest.raises(pa.ArrowInvalid, match="'name'"):
        head_action(cluster, kind, '{"v": 1, "name": 5}')
    assert_still_serving(cluster)


@pytest.mark.parametrize("kind", ["5", "null", '"bogus"'])
def test_descriptor_kind_of_wrong_type_is_invalid_naming_kind(cluster, kind):
    with pytest.raises(pa.ArrowInvalid, match="'kind'"):
        head_info(cluster, f'{{"v": 1, "kind": {kind}, "dataset": "good"}}')
    assert_still_serving(cluster)


@pytest.mark.parametrize("kind", ["epoch", "rows"])
def test_descriptor_dataset_of_wrong_type_is_invalid_naming_dataset(cluster, kind):
    extra = ', "batch_size": 4' if kind == "epoch" else ', "rows": [1]'
    with pytest.raises(pa.ArrowInvalid, match="'dataset'"):
        head_info(cluster, f'{{"v": 1, "kind": "{kind}", "dataset": 5{extra}}}')
    assert_still_serving(cluster)


def test_deeply_nested_name_is_invalid_and_nothing_crashes(cluster):
    nested = "[" * 100_000 + "]" * 100_000
    for kind in ("describe", "evict", "load"):
        with pytest.raises(pa.ArrowInvalid, match="nest"):
            head_action(cluster, kind, f'{{"v": 1, "name": {nested}}}')
    with pytest.raises(pa.ArrowInvalid, match="nest"):
        head_info(cluster, f'{{"v": 1, "kind": "range", "dataset": {nested}}}')
    assert_still_serving(cluster)


@pytest.mark.parametrize("kind, body, field", [
    ("node.commit", {"v": 1, "dataset": 5, "generation": 1, "task_starts": []}, "dataset"),
    ("node.commit", {"v": 1, "dataset": "x", "generation": "1", "task_starts": []},
     "generation"),
    ("node.commit", {"v": 1, "dataset": "x", "generation": 1, "task_starts": ["a"]},
     "task_starts"),
    ("node.evict", {"v": 1, "dataset": ["good"], "generation": 0}, "dataset"),
    ("node.evict", {"v": 1, "dataset": "good", "generation": -1}, "generation"),
    ("node.evict", {"v": 1, "dataset": "good", "generation": 1.5}, "generation"),
])
def test_signed_node_actions_with_wrong_types_are_invalid(cluster, kind, body, field):
    with pytest.raises(pa.ArrowInvalid, match=f"'{field}'"):
        signed_action(cluster, cluster.node_uris[0], kind, body)
    assert_still_serving(cluster)


# -- numbers silently rewritten instead of refused -------------------------------


@pytest.mark.parametrize("cmd, field", [
    ({"kind": "range", "start": 2**70}, "start"),
    ({"kind": "range", "start": 0, "stop": 2**70}, "stop"),
    ({"kind": "range", "start": -1}, "start"),
    ({"kind": "range", "start": 1.5}, "start"),
    ({"kind": "epoch", "batch_size": 4, "world_size": -1}, "world_size"),
    ({"kind": "epoch", "batch_size": 4, "num_workers": -1}, "num_workers"),
    ({"kind": "epoch", "batch_size": 2.5}, "batch_size"),
    ({"kind": "epoch", "batch_size": 4, "block_rows": 2**70, "shuffle": "block"}, "block_rows"),
    ({"kind": "epoch", "batch_size": 4, "seed": -3}, "seed"),
    ({"kind": "epoch", "batch_size": 4, "start": 2**64}, "start"),
    ({"kind": "rows", "rows": [1, 2**70]}, "rows"),
    ({"kind": "rows", "rows": [1.5]}, "rows"),
])
def test_out_of_range_and_fractional_numbers_are_refused(cluster, cmd, field):
    body = json.dumps({"v": 1, "dataset": "good", **cmd})
    with pytest.raises(pa.ArrowInvalid, match=f"'{field}'"):
        head_info(cluster, body)
    assert_still_serving(cluster)


@pytest.mark.parametrize("value", [2.5, -1, 2**70, "7"])
def test_load_batch_rows_must_be_an_integer_in_range(cluster, warehouse, value):
    source = warehouse.table("t").metadata_location
    body = json.dumps({"v": 1, "name": "b", "source": source, "batch_rows": value})
    with pytest.raises(pa.ArrowInvalid, match="'batch_rows'"):
        head_action(cluster, "load", body)
    # The Python client refuses to round it too.
    with cluster.client() as c, pytest.raises(icefloe.InvalidArgument, match="batch_rows"):
        c.load("b", source, batch_rows=value)
    assert_still_serving(cluster)


def test_load_batch_size_is_the_deprecated_name_of_batch_rows(cluster, warehouse):
    # batch_size names a consumer's rows per batch everywhere else; at load it
    # meant rows per cached record batch, and still does, with a warning.
    source = warehouse.table("t").metadata_location
    with cluster.client() as c:
        with pytest.warns(DeprecationWarning, match="pass batch_rows="):
            old = c.load("renamed", source, batch_size=250)
        assert old["batch_rows"] == 250
        assert c.load("renamed", source, batch_rows=250)["generation"] == old["generation"]
        with pytest.raises(icefloe.InvalidArgument, match="give batch_rows= only"):
            c.load("renamed", source, batch_rows=250, batch_size=250)
        c.evict("renamed")
    assert_still_serving(cluster)


# -- a failed node load wedges the name ------------------------------------------


def test_failed_node_load_releases_the_name(cluster, warehouse):
    body = {"v": 1, "dataset": "wedged", "generation": 7,
            "schema": {"type": "struct", "schema-id": "x", "fields": []}, "tasks": []}
    for node in cluster.node_uris:
        with pytest.raises(pa.ArrowInvalid, match="schema-id"):
            signed_action(cluster, node, "node.load", body)
    with cluster.client() as c:
        desc = c.load("wedged", warehouse.table("t").metadata_location)
        assert sorted(c.read("wedged").column("id").to_pylist()) == list(range(600))
        assert desc["rows"] == 600
        c.evict("wedged")
    assert_still_serving(cluster)


# -- a bad registration breaks the head ------------------------------------------


def test_bad_registration_is_refused_and_leaves_no_phantom(cluster):
    body = {"v": 1, "location": "grpc://127.0.0.1:1",
            "status": {"memory_limit_bytes": "lots", "memory_used_bytes": 0}}
    with pytest.raises(pa.ArrowInvalid, match="memory_limit_bytes"):
        signed_action(cluster, cluster.head_uri, "node.register", body)
    with cluster.client() as c:
        assert "grpc://127.0.0.1:1" not in {n["location"] for n in c.status()["nodes"]}
    assert_still_serving(cluster)


# -- concurrent loads of one name ------------------------------------------------


def test_identical_concurrent_loads_join_one_load(warehouse, tmp_path):
    source = warehouse.table("t").metadata_location
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path) as cluster:
        for trial in range(5):
            name = f"race{trial}"
            results: list = [None, None]

            def load(i: int, name: str = name, results: list = results) -> None:
                with cluster.client() as c:
                    try:
                        results[i] = c.load(name, source)
                    except icefloe.Error as exc:
                        results[i] = exc

            threads = [threading.Thread(target=load, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=120)
            assert all(isinstance(r, dict) for r in results), results
            assert results[0]["generation"] == results[1]["generation"]
        with cluster.client() as c:
            assert c.read("race4").num_rows == 600


# -- node actions unsigned by default --------------------------------------------


def test_node_actions_are_refused_unsigned_by_default(cluster):
    body = json.dumps({"v": 1, "dataset": "good", "generation": 0}).encode()
    for node in cluster.node_uris:
        with flight.connect(node) as c, pytest.raises(
                flight.FlightUnauthorizedError, match="only the head of this cluster sends it"):
            list(c.do_action(flight.Action("node.evict", body)))
    assert_still_serving(cluster)


def test_an_unsigned_node_register_is_refused_naming_who_signs_it(cluster):
    # Issue 30: the head said "only accepted from the head" of an action that
    # data nodes send to the head.
    body = json.dumps({"v": 1, "location": "grpc://127.0.0.1:9", "status": {}}).encode()
    with flight.connect(cluster.head_uri) as c, pytest.raises(flight.FlightUnauthorizedError) as e:
        list(c.do_action(flight.Action("node.register", body)))
    message = str(e.value)
    assert "from the head" not in message, message
    assert "data node" in message and "--cluster-secret-file" in message, message
    assert_still_serving(cluster)


# -- the head aborts when a node answers with a wrong-typed field ----------------


class FakeNode(flight.FlightServerBase):
    """A data node that answers node actions with what `answers` says."""

    def __init__(self, answers: dict[str, dict]) -> None:
        super().__init__("grpc://127.0.0.1:0")
        self.answers = answers
        self.location = f"grpc://127.0.0.1:{self.port}"

    def do_action(self, context, action):
        answer = self.answers.get(action.type)
        if answer is None:
            raise flight.FlightServerError(f"fake node: no answer for {action.type}")
        if callable(answer):
            answer = answer(json.loads(action.body.to_pybytes() or b"{}"))
        return [json.dumps(answer).encode()]


def good_status(location: str) -> dict:
    return {"location": location, "memory_limit_bytes": 1 << 30, "memory_used_bytes": 0,
            "datasets": [], "loads": [], "staged": 0}


def test_wrong_typed_node_status_does_not_abort_the_head(warehouse, tmp_path):
    fake = FakeNode({})
    fake.answers["node.status"] = {**good_status(fake.location), "memory_limit_bytes": "lots"}
    try:
        with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path,
                                  head_args=["--node", fake.location],
                                  ready_timeout_s=30) as cluster:
            with cluster.client() as c:
                nodes = {n["location"]: n for n in c.status()["nodes"]}
                assert nodes[fake.location]["state"] != "alive"
                assert "memory_limit_bytes" in nodes[fake.location]["error"]
                c.load("t", warehouse.table("t").metadata_location)
                assert c.read("t").num_rows == 600
            assert cluster.head.alive()
    finally:
        fake.shutdown()


def test_wrong_typed_node_load_reply_fails_the_load_not_the_head(warehouse, tmp_path):
    fake = FakeNode({})
    fake.answers["node.status"] = good_status(fake.location)
    fake.answers["node.load"] = lambda b: {"dataset": b["dataset"], "generation": b["generation"],
                                           "state": "loading"}
    fake.answers["node.load_status"] = lambda b: {
        "dataset": b["dataset"], "generation": b["generation"], "state": "staged",
        "task_rows": "oops"}
    fake.answers["node.evict"] = {"evicted": True, "bytes": 0}
    try:
        with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path,
                                  head_args=["--node", fake.location]) as cluster:
            with cluster.client() as c:
                assert any(n["location"] == fake.location and n["state"] == "alive"
                           for n in c.status()["nodes"])
                with pytest.raises(icefloe.Unavailable, match="'task_rows'") as err:
                    c.load("t", warehouse.table("t").metadata_location)
                assert fake.location in str(err.value)
                # The head is fine; the misbehaving node is out of the placement.
                desc = c.load("t", warehouse.table("t").metadata_location)
                assert sorted(c.read("t").column("id").to_pylist()) == list(range(600))
                assert {n for s in desc["slices"] for n in s["nodes"]} == {cluster.node_uris[0]}
            assert cluster.head.alive()
    finally:
        fake.shutdown()


def test_conflicting_load_is_refused_and_evict_cancels_a_running_load(warehouse, tmp_path):
    # A fake node that never finishes loading keeps the load running.
    fake = FakeNode({})
    evicted: list[dict] = []
    fake.answers["node.status"] = good_status(fake.location)
    fake.answers["node.load"] = lambda b: {"dataset": b["dataset"], "generation": b["generation"],
                                           "state": "loading"}
    fake.answers["node.load_status"] = fake.answers["node.load"]
    fake.answers["node.evict"] = lambda b: evicted.append(b) or {"evicted": True, "bytes": 0}
    source = warehouse.table("t").metadata_location
    try:
        with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path,
                                  head_args=["--node", fake.location]) as cluster:
            outcome: dict = {}

            def load() -> None:
                with cluster.client() as c:
                    try:
                        outcome["first"] = c.load("slow", source)
                    except icefloe.Error as exc:
                        outcome["first"] = exc

            thread = threading.Thread(target=load)
            thread.start()
            with cluster.client() as c:
                for _ in range(600):  # until the load runs (bounded: 30 s)
                    if any(p["phase"] == "loading" for p in c.status()["loads"]):
                        break
                    threading.Event().wait(0.05)
                with pytest.raises(icefloe.AlreadyExists, match="other arguments"):
                    c.load("slow", source, columns=["id"])
                assert c.evict("slow")["cancelled"] is True
            thread.join(timeout=60)
            assert isinstance(outcome["first"], icefloe.Cancelled), outcome
            assert any(e["dataset"] == "slow" for e in evicted)  # cleaned up on the node
            with cluster.client() as c:
                assert c.status()["loads"] == []
                assert [d["name"] for d in c.datasets()] == []
    finally:
        fake.shutdown()
