"""Property test: no bad input is accepted, none crashes a server.

Every action, descriptor and node message is sent to a real LocalCluster
with one field replaced by a bad value drawn from that field's own rules
(_fields.json): wrong types, null, out-of-range, negative, fractional and
overflowing numbers, strings too long or not among the choices, lists too
long or with bad items, and deeply nested JSON. Each must be answered with
InvalidArgument naming the field, never an unknown error or a crash, and a
dataset loaded before still reads back exactly. Random tickets and tickets
with flipped bytes are refused the same way.

The seed is printed; ICEFLOE_FUZZ_SEED=<seed> replays a run.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import random
import urllib.request

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from hypothesis import HealthCheck, assume, given, seed, settings
from hypothesis import strategies as st
from iceberg_util import Warehouse

import icefloe
from icefloe import _protocol

SEED = int(os.environ.get("ICEFLOE_FUZZ_SEED", random.SystemRandom().randrange(2**32)))
print(f"test_bad_input: ICEFLOE_FUZZ_SEED={SEED}")
SETTINGS = settings(max_examples=120, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    wh = Warehouse(tmp_path_factory.mktemp("wh"))
    ids = np.arange(3000, dtype=np.int64)
    t = wh.create("t", pa.table({"id": ids[:1500], "x": ids[:1500] * 0.5}))
    t.append(pa.table({"id": ids[1500:], "x": ids[1500:] * 0.5}))
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path_factory.mktemp("c")) as c:
        with c.client() as client:
            client.load("good", t.metadata_location, batch_rows=500)
            expected = client.read("good")
        yield c, t.metadata_location, expected
        assert_intact(c, expected)


def assert_intact(cluster, expected: pa.Table) -> None:
    assert cluster.head.alive() and all(n.alive() for n in cluster.nodes)
    with cluster.client() as c:
        assert c.read("good").equals(expected)
        assert c.status()["ready"]
    with urllib.request.urlopen(cluster.head.health + "/metrics", timeout=10) as resp:
        assert resp.status == 200


# -- bad values from a field's rules --------------------------------------------

HUGE = 2**70


def bad_values(spec: dict) -> st.SearchStrategy:
    kind = spec["type"]
    wrong = [None, True, "x", 1.5, [], {}, [1], {"a": 1}, 2.0, -7]
    if kind in ("int", "uint"):
        lo, hi = spec["min"], spec["max"]
        return st.one_of(
            st.sampled_from([v for v in wrong if not (isinstance(v, int) and lo <= v <= hi)
                             or isinstance(v, bool)]),
            st.integers(min_value=-HUGE, max_value=lo - 1),
            st.integers(min_value=hi + 1, max_value=max(hi + 1, HUGE)),
            st.floats(allow_nan=False, allow_infinity=False, min_value=-1e30, max_value=1e30),
        )
    if kind == "string":
        options = [st.sampled_from([v for v in wrong if not isinstance(v, str)])]
        if spec["min"] > 0:
            options.append(st.just(""))
        if spec["max"] <= 1 << 20:
            options.append(st.integers(spec["max"] + 1, spec["max"] + 50).map(lambda n: "a" * n))
        if spec.get("choices"):
            printable = st.characters(min_codepoint=32, max_codepoint=126)
            options.append(st.text(printable, min_size=1, max_size=8).filter(
                lambda s: s not in spec["choices"]))
        return st.one_of(*options)
    if kind == "bool":
        return st.sampled_from([v for v in wrong if not isinstance(v, bool)] + [0, 1, "true"])
    if kind in ("string_list", "int_list", "uint_list"):
        item_spec = {**spec, "type": "string" if kind == "string_list" else "int"}
        options = [st.sampled_from([v for v in wrong if not isinstance(v, list)]),
                   bad_values(item_spec).map(lambda v: [v])]
        if spec["max_items"] <= 70_000 and kind != "string_list":
            options.append(st.just([spec["min"] if spec["min"] >= 0 else 0] *
                                   (spec["max_items"] + 1)))
        return st.one_of(*options)
    if kind == "object":
        return st.sampled_from([v for v in wrong if not isinstance(v, dict)])
    if kind == "object_list":
        return st.sampled_from([v for v in wrong if not isinstance(v, list)] + [[5], ["x"]])
    raise AssertionError(kind)


NESTED_MARK = "\u0000nested\u0000"


def nested_text(depth: int) -> str:
    """JSON nested `depth` deep, lists and objects in turn (as text: Python's
    json module would recurse too deep to write it)."""
    opens = "".join("[" if i % 2 else '{"k": ' for i in range(depth))
    closes = "".join("]" if i % 2 else "}" for i in reversed(range(depth)))
    return opens + "1" + closes


# -- sending ---------------------------------------------------------------------


def send(cluster, kind: str, body: dict | str, *, to_node: bool = False,
         sign: bool = False, descriptor: bool = False) -> None:
    payload = (body if isinstance(body, str) else json.dumps(body)).encode()
    target = cluster.node_uris[0] if to_node else cluster.head_uri
    with flight.connect(target) as c:
        if descriptor:
            c.get_flight_info(flight.FlightDescriptor.for_command(payload))
            return
        headers = []
        if sign:
            mac = hmac.new(cluster.cluster_secret.encode(), kind.encode() + b"\n" + payload,
                           hashlib.sha256)
            headers = [(b"x-icefloe-signature", mac.hexdigest().encode())]
        list(c.do_action(flight.Action(kind, payload),
                         flight.FlightCallOptions(timeout=30, headers=headers)))


def expect_invalid(needle: str, fn) -> None:
    with pytest.raises(pa.ArrowInvalid) as err:  # not Flight's UNKNOWN, not a crash
        fn()
    assert needle in str(err.value), str(err.value)


STATUS = {"location": "grpc://127.0.0.1:9", "memory_limit_bytes": 1 << 30,
          "memory_used_bytes": 0, "datasets": [], "loads": [], "staged": 0}
DATA = {"content": 0, "path": "file:///tmp/none.parquet", "records": 1, "size": 1}
SCHEMA = {"type": "struct", "schema-id": 0,
          "fields": [{"id": 1, "name": "id", "required": True, "type": "long"}]}

# message -> (how it is sent, a valid body); the property replaces one field.
MESSAGES = {
    "load": (dict(), lambda src: {"v": 1, "name": "p", "source": src}),
    "describe": (dict(), lambda src: {"v": 1, "name": "good"}),
    "evict": (dict(), lambda src: {"v": 1, "name": "absent"}),
    "range descriptor": (dict(descriptor=True),
                         lambda src: {"v": 1, "kind": "range", "dataset": "good"}),
    "epoch descriptor": (dict(descriptor=True),
                         lambda src: {"v": 1, "kind": "epoch", "dataset": "good",
                                      "batch_size": 4}),
    "rows descriptor": (dict(descriptor=True),
                        lambda src: {"v": 1, "kind": "rows", "dataset": "good", "rows": [1]}),
    "job.report": (dict(), lambda src: {"v": 1, "job": "j", "rank": 0, "world_size": 2,
                                        "wait_us": 1, "elapsed_us": 10, "nodes": ["n"]}),
    "node.register": (dict(sign=True),
                      lambda src: {"v": 1, "location": "grpc://127.0.0.1:9", "status": STATUS}),
    "node.load": (dict(sign=True, to_node=True),
                  lambda src: {"v": 1, "dataset": "p", "generation": 5, "schema": SCHEMA,
                               "tasks": [{"index": 0, "data": DATA}]}),
    "node.load_status": (dict(sign=True, to_node=True),
                         lambda src: {"v": 1, "dataset": "p", "generation": 5}),
    "node.commit": (dict(sign=True, to_node=True),
                    lambda src: {"v": 1, "dataset": "p", "generation": 5, "task_starts": [0]}),
    "node.evict": (dict(sign=True, to_node=True),
                   lambda src: {"v": 1, "dataset": "absent", "generation": 5}),
}
# Nested messages: where they sit in their parent, and their field list.
NESTED = [("node.register", ("status",), "node.status reply"),
          ("node.load", ("tasks", 0, "data"), "data file")]


def targets() -> list[tuple[str, tuple, dict]]:
    out = []
    for message in MESSAGES:
        for spec in _protocol.fields(message).values():
            if spec["name"] != "kind":
                out.append((message, (spec["name"],), spec))
    for message, path, nested_message in NESTED:
        for spec in _protocol.fields(nested_message).values():
            out.append((message, (*path, spec["name"]), spec))
    return out


TARGETS = targets()


@st.composite
def mutations(draw):
    message, path, spec = draw(st.sampled_from(TARGETS))
    if draw(st.integers(0, 9)) == 0:  # deeply nested, whatever the field (built in the test)
        return message, path, ("nested", draw(st.integers(65, 3000))), "nested deeper"
    return message, path, ("value", draw(bad_values(spec))), f"'{spec['name']}'"


@seed(SEED)
@SETTINGS
@given(mutations())
def test_every_message_refuses_every_bad_field(cluster, mutation):
    c, source, _ = cluster
    message, path, (form, value), needle = mutation
    depth = value if form == "nested" else 0
    if form == "nested":
        value = NESTED_MARK
    how, make = MESSAGES[message]
    body = make(source)
    parent = body
    for key in path[:-1]:
        parent = parent[key]
    parent = json.loads(json.dumps(parent))  # copy the nested part we change
    holder = body
    for key in path[:-2]:
        holder = holder[key]
    if len(path) > 1:
        holder[path[-2]] = parent
    (parent if len(path) > 1 else body)[path[-1]] = value
    kind = message if not how.get("descriptor") else "descriptor"
    text = json.dumps(body).replace(json.dumps(NESTED_MARK), nested_text(depth))
    expect_invalid(needle, lambda: send(c, kind, text, **how))


@seed(SEED)
@SETTINGS
@given(st.binary(max_size=300))
def test_random_tickets_are_refused(cluster, data):
    c, _, _ = cluster
    with flight.connect(c.node_uris[0]) as node:
        with pytest.raises((pa.ArrowInvalid, pa.ArrowKeyError)):
            node.do_get(flight.Ticket(data)).read_all()


@seed(SEED)
@SETTINGS
@given(st.data())
def test_tampered_tickets_are_refused(cluster, data):
    c, _, _ = cluster
    with c.client() as client:
        info = client.epoch_info("good", batch_size=7, shuffle="sample", seed=1)[0]
    original = info.endpoints[0].ticket.ticket
    ticket = bytearray(original)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(ticket) - 1))
        ticket[pos] ^= data.draw(st.integers(1, 255))
    if data.draw(st.booleans()):
        ticket = ticket[: data.draw(st.integers(0, len(ticket)))]
    assume(bytes(ticket) != original)
    with flight.connect(info.endpoints[0].locations[0].uri.decode()) as node:
        with pytest.raises((pa.ArrowInvalid, pa.ArrowKeyError)):
            node.do_get(flight.Ticket(bytes(ticket))).read_all()


def test_malformed_bodies_and_unknown_actions(cluster):
    c, _, expected = cluster
    for kind in ("load", "describe", "evict"):
        for text in ("", "nul", "[]", "5", '{"v": 1', '{"v": 2}', '{"v": 1.0}', "\xff"):
            expect_invalid(kind, lambda kind=kind, text=text: send(c, kind, text))
    with flight.connect(c.head_uri) as head, pytest.raises(pa.ArrowNotImplementedError):
        list(head.do_action(flight.Action("no.such.action", b"{}")))
    for path in ([], ["a", "b", "c"], ["x", "1"]):
        with flight.connect(c.head_uri) as head, pytest.raises(pa.ArrowInvalid):
            head.get_flight_info(flight.FlightDescriptor.for_path(*path))
    assert_intact(c, expected)
