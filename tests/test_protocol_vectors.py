"""The shared protocol vectors (cpp/icefloe/protocol/testdata/vectors.json).

protocol_test (C++) checks the servers' parsers with them; here the Python
client's encoder must reach the same verdict on every client message, and a
running cluster must answer every invalid one with InvalidArgument naming the
same field: the client, the C++ parsers and the servers agree.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

import icefloe
from icefloe import _protocol

VECTORS = Path(__file__).resolve().parents[1] / "cpp/icefloe/protocol/testdata/vectors.json"
CASES = json.loads(VECTORS.read_text())["cases"]
CLIENT_MESSAGES = {"load", "describe", "evict", "descriptor"}
# Node messages the servers take (replies are parsed by the head: the fake
# node tests in test_regressions_core.py cover those).
SERVER_MESSAGES = CLIENT_MESSAGES | {"node.register", "node.load", "node.load_status",
                                     "node.commit", "node.evict"}


def _id(case: dict) -> str:
    return f"{case['message']}:{json.dumps(case.get('body', case.get('text')))[:60]}"


def _needle(case: dict) -> str:
    return case["error_text"] if "error_text" in case else f"'{case['error']}'"


@pytest.mark.parametrize("case", [c for c in CASES
                                  if c["message"] in CLIENT_MESSAGES and "body" in c], ids=_id)
def test_python_encoder_agrees_with_the_servers(case):
    if case.get("error") is None:
        _protocol.validate(case["message"], case["body"])
        return
    with pytest.raises(icefloe.InvalidArgument) as err:
        _protocol.validate(case["message"], case["body"])
    assert _needle(case) in str(err.value)


# The head's replies, which the client checks as the head's tables write them.
REPLY_MESSAGES = {"dataset description", "load progress", "evict reply", "slice_map reply",
                  "ok reply", "status reply", "slice", "epoch shape", "shared file"}


@pytest.mark.parametrize("case", [c for c in CASES if c["message"] in REPLY_MESSAGES], ids=_id)
def test_python_reply_checks_agree_with_the_servers(case):
    if case.get("error") is None:
        _protocol.validate_reply(case["message"], case["body"])
        return
    with pytest.raises(icefloe.ProtocolError) as err:
        _protocol.validate_reply(case["message"], case["body"])
    assert _needle(case) in str(err.value)


def test_the_field_list_is_the_servers():
    # _fields.json is generated from the C++ tables (checked by protocol_test);
    # the client reads its rules from there, e.g. batch_rows' range.
    spec = _protocol.fields("load")["batch_rows"]
    assert (spec["type"], spec["min"], spec["max"]) == ("int", 1, 1 << 24)
    assert _protocol.fields("epoch descriptor")["batch_size"]["required"] is True


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with icefloe.LocalCluster(num_nodes=1, log_dir=tmp_path_factory.mktemp("vectors")) as c:
        yield c


def _send(cluster, case: dict) -> None:
    message = case["message"]
    payload = (case["text"] if "text" in case else json.dumps(case["body"])).encode()
    if message == "descriptor":
        with flight.connect(cluster.head_uri) as c:
            c.get_flight_info(flight.FlightDescriptor.for_command(payload))
        return
    target = cluster.node_uris[0] if message.startswith("node.") else cluster.head_uri
    if message == "node.register":
        target = cluster.head_uri
    headers = []
    if message.startswith("node."):
        sig = hmac.new(cluster.cluster_secret.encode(), message.encode() + b"\n" + payload,
                       hashlib.sha256)
        headers = [(b"x-icefloe-signature", sig.hexdigest().encode())]
    with flight.connect(target) as c:
        list(c.do_action(flight.Action(message, payload),
                         flight.FlightCallOptions(timeout=30, headers=headers)))


def test_servers_refuse_every_invalid_vector_naming_the_field(cluster):
    checked = 0
    for case in CASES:
        if case["message"] not in SERVER_MESSAGES or case.get("error", "x") is None:
            continue
        with pytest.raises(pa.ArrowInvalid) as err:
            _send(cluster, case)
        assert _needle(case) in str(err.value), (_id(case), str(err.value))
        checked += 1
    assert checked > 150
    with cluster.client() as c:
        assert c.status()["ready"]


def test_docs_describe_every_field():
    # docs/protocol.md has a table row for every field of every message.
    docs = (Path(__file__).resolve().parents[1] / "docs/protocol.md").read_text()
    for message in json.loads((Path(_protocol.__file__).parent / "_fields.json").read_text())[
            "messages"]:
        for field in message["fields"]:
            assert f"| `{field['name']}` | {field['type']} |" in docs, (message["message"],
                                                                     field["name"])
