"""The client checks every reply of the head against its field list
(_fields.json): a malformed one is a ProtocolError naming the reply and the
field, raised where the reply is decoded, not a KeyError later."""

from __future__ import annotations

import json
import threading

import pyarrow.flight as flight
import pytest

import icefloe

GOOD_DESCRIPTION = {
    "name": "d", "state": "ready", "source": "file:///t", "metadata_location": "file:///t/m.json",
    "columns": [], "filter": "", "batch_rows": 65536, "replication": 1, "generation": 3,
    "rows": 10, "bytes": 80, "estimated_bytes": 80, "tasks": 1, "load_seconds": 0.5,
    "scan": {}, "slices_missing": 0, "replicas_missing": 0,
    "slices": [{"start": 0, "stop": 10, "nodes": ["grpc://a:1"]}],
}


class FakeHead(flight.FlightServerBase):
    """Answers every action with the bodies in ``replies`` (by action)."""

    def __init__(self, replies: dict[str, list[object]]) -> None:
        super().__init__("grpc://127.0.0.1:0")
        self.replies = replies

    def do_action(self, context, action):
        for reply in self.replies[action.type]:
            yield flight.Result(json.dumps(reply).encode())


@pytest.fixture
def head():
    server = FakeHead({})
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    thread.join(timeout=10)


def _client(head: FakeHead) -> icefloe.Client:
    return icefloe.Client(f"grpc://127.0.0.1:{head.port}", head_retry_s=0)


def test_a_well_formed_reply_passes_unchanged(head):
    head.replies["describe"] = [GOOD_DESCRIPTION]
    with _client(head) as c:
        desc = c.describe("d")
    assert desc["rows"] == 10 and desc["slices"][0]["nodes"] == ["grpc://a:1"]
    assert desc["snapshot_id"] is None  # left out on the wire, kept in the description


@pytest.mark.parametrize(("action", "reply", "needle"), [
    ("describe", {**GOOD_DESCRIPTION, "rows": "10"},
     "dataset description: 'rows' must be an integer in 0.."),
    ("describe", {k: v for k, v in GOOD_DESCRIPTION.items() if k != "state"},
     "dataset description: missing 'state'"),
    ("describe", {**GOOD_DESCRIPTION, "slices": [{"start": 5, "stop": 1, "nodes": []}]},
     "dataset description 'slices'[0]: 'stop' 1 is before 'start' 5"),
    ("evict", {"name": "d", "bytes": -1, "cancelled": False},
     "evict reply: 'bytes' must be an integer in 0.."),
    ("status", [], "status reply: not a JSON object"),
    # The parts are typed too, and named by their path.
    ("describe", {**GOOD_DESCRIPTION, "scan": {"planning_ms": "x"}},
     "dataset description 'scan': 'planning_ms' must be a number"),
    ("describe", {**GOOD_DESCRIPTION, "files": [{"path": "a", "start": 0, "rows": 1}, {}]},
     "dataset description 'files'[1]: missing 'path'"),
    ("describe", {**GOOD_DESCRIPTION, "refresh": {"from_generation": 1}},
     "dataset description 'refresh': missing 'tasks_reused'"),
    ("list", [{**GOOD_DESCRIPTION, "slices_per_node": {"grpc://a:1": 1}}],
     "list reply [0]: 'slices_per_node' must be a list; got"),
    ("status", {"ready": True, "reason": "", "recovering": False, "default_dataset": "",
                "nodes": [], "datasets": [], "retired": [], "loads": [], "recent_loads": [],
                "jobs": [], "follow": {"period_s": 30, "datasets": [{"name": "d"}]}},
     "status reply 'follow' 'datasets'[0]: missing 'source'"),
    ("list", [GOOD_DESCRIPTION, {**GOOD_DESCRIPTION, "load_seconds": None}],
     "list reply [1]: 'load_seconds' must be a number"),
])
def test_a_malformed_reply_is_refused_naming_the_field(head, action, reply, needle):
    head.replies[action] = [reply]
    with _client(head) as c, pytest.raises(icefloe.ProtocolError) as err:
        {"describe": lambda: c.describe("d"), "evict": lambda: c.evict("d"),
         "status": c.status, "list": c.datasets}[action]()
    assert needle in str(err.value)
    assert isinstance(err.value, icefloe.ServerError)


def test_load_progress_is_checked_before_the_description(head):
    progress = {"state": "loading", "phase": "loading", "name": "d", "tasks_done": 1,
                "tasks_total": 2, "estimated_bytes": 0, "seconds": 0.5}
    head.replies["load"] = [progress, GOOD_DESCRIPTION]
    seen = []
    with _client(head) as c:
        assert c.load("d", "file:///t", progress=seen.append)["rows"] == 10
        assert seen == [progress]
        head.replies["load"] = [{**progress, "phase": "thinking"}, GOOD_DESCRIPTION]
        with pytest.raises(icefloe.ProtocolError, match="load progress: 'phase' must be one of"):
            c.load("d", "file:///t")
