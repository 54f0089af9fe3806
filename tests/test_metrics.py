"""Prometheus metrics of a running local cluster, per-job stall reports, and
the Grafana dashboard's queries against what the servers really export.

Counters are checked exactly: every row and byte a DoGet sends is counted
once on the node that sent it (bytes: the Arrow IPC body of each record
batch, which the client recomputes from the batches it received).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from iceberg_util import Warehouse

import icefloe
from icefloe import _stall
from icefloe.errors import InvalidArgument

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "deploy" / "monitoring" / "icefloe-dashboard.json"
ROWS = 20_000

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(health_url: str) -> dict[tuple[str, frozenset], float]:
    """{(name, labels): value} of one /metrics page."""
    with urllib.request.urlopen(health_url + "/metrics", timeout=30) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, line
        labels = frozenset(_LABEL.findall(m.group("labels") or ""))
        out[(m.group("name"), labels)] = float(m.group("value"))
    return out


def total(samples, name: str, **labels: str) -> float:
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def scrape_nodes(cluster):
    return [scrape(n.health) for n in cluster.nodes]


def nodes_total(scrapes, name: str, **labels: str) -> float:
    return sum(total(s, name, **labels) for s in scrapes)


def body_bytes(batch: pa.RecordBatch) -> int:
    """The Arrow IPC body size of a record batch, as a node sends it."""
    return pa.ipc.read_message(batch.serialize()).body.size


def read_raw(client: icefloe.Client, info: flight.FlightInfo) -> tuple[int, int]:
    """Rows and IPC body bytes of every record batch of every endpoint."""
    rows = nbytes = 0
    for endpoint in info.endpoints:
        reader = client.node(endpoint.locations[0].uri.decode()).do_get(
            endpoint.ticket, options=client.call_options())
        for chunk in reader:
            rows += chunk.data.num_rows
            nbytes += body_bytes(chunk.data)
    return rows, nbytes


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    data = pa.table({"id": pa.array(range(ROWS), pa.int64()),
                     "x": pa.array([i * 0.5 for i in range(ROWS)]),
                     "s": pa.array([f"row-{i}" if i % 5 else None for i in range(ROWS)])})
    return Warehouse(tmp_path_factory.mktemp("wh")).create("t", data)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with icefloe.LocalCluster(num_nodes=2, log_dir=tmp_path_factory.mktemp("logs")) as c:
        yield c


def test_counters_move_by_exactly_what_was_served_and_loaded(cluster, table):
    name = "exact"
    head0, nodes0 = scrape(cluster.head.health), scrape_nodes(cluster)
    with cluster.client() as c:
        desc = c.load(name, table.metadata_location, batch_rows=3000)
        head1, nodes1 = scrape(cluster.head.health), scrape_nodes(cluster)
        # The load: one more done, its rows and bytes published on the nodes.
        assert total(head1, "icefloe_head_loads_done_total") == \
            total(head0, "icefloe_head_loads_done_total") + 1
        assert total(head1, "icefloe_head_datasets", state="ready") >= 1
        # Nothing lost: the heal gauges are there, at 0.
        for gauge in ("icefloe_head_datasets_degraded", "icefloe_head_datasets_healing",
                      "icefloe_head_slices_missing", "icefloe_head_replicas_missing"):
            assert head1[(gauge, frozenset())] == 0, gauge
        assert head1[("icefloe_head_datasets", frozenset({("state", "degraded")}))] == 0
        assert total(head1, "icefloe_head_dataset_rows", dataset=name) == ROWS
        assert nodes_total(nodes1, "icefloe_node_loaded_rows_total") - \
            nodes_total(nodes0, "icefloe_node_loaded_rows_total") == ROWS
        assert nodes_total(nodes1, "icefloe_node_loaded_bytes_total") - \
            nodes_total(nodes0, "icefloe_node_loaded_bytes_total") == desc["bytes"]
        assert total(head1, "icefloe_head_planning_seconds_count") == \
            total(head0, "icefloe_head_planning_seconds_count") + 1

        # An epoch (window shuffle: gathered pieces) and a range read, by hand.
        info, _ = c.epoch_info(name, batch_size=512, seed=7, world_size=1, rank=0)
        plan_rows, plan_bytes = read_raw(c, info)
        range_info = c.flight_info(name, 100, 15_100)
        range_rows, range_bytes = read_raw(c, range_info)
        assert plan_rows == ROWS - ROWS % 512 and range_rows == 15_000  # drop_last
    head2, nodes2 = scrape(cluster.head.health), scrape_nodes(cluster)

    def moved(metric, **labels):
        return nodes_total(nodes2, metric, **labels) - nodes_total(nodes1, metric, **labels)

    assert moved("icefloe_node_served_rows_total", ticket="plan") == plan_rows
    assert moved("icefloe_node_served_bytes_total", ticket="plan") == plan_bytes
    assert moved("icefloe_node_served_rows_total", ticket="range") == range_rows
    assert moved("icefloe_node_served_bytes_total", ticket="range") == range_bytes
    assert moved("icefloe_node_doget_streams_total") == \
        len(info.endpoints) + len(range_info.endpoints)
    assert moved("icefloe_node_gathers_total") > 0  # window batches are gathered
    assert moved("icefloe_node_gathered_rows_total") == plan_rows
    assert moved("icefloe_node_doget_first_batch_seconds_count") == moved(
        "icefloe_node_doget_streams_total")
    assert nodes_total(nodes2, "icefloe_node_doget_streams_active") == 0
    assert total(head2, "icefloe_head_flight_info_total", descriptor="epoch", outcome="ok") == \
        total(head1, "icefloe_head_flight_info_total", descriptor="epoch", outcome="ok") + 1
    # Memory: what the nodes hold is what their budgets are charged.
    for s in nodes2:
        assert total(s, "icefloe_node_memory_used_bytes") >= total(s, "icefloe_node_dataset_bytes")
    assert sum(total(s, "icefloe_node_dataset_rows", dataset=name) for s in nodes2) == ROWS


def test_errors_are_counted_by_code(cluster, table):
    with cluster.client() as c:
        with pytest.raises(icefloe.errors.NotFound):
            c.epoch_info("no-such-dataset", batch_size=10)
        before = scrape_nodes(cluster)
        bad = flight.Ticket(b"not a ticket")
        with pytest.raises(pa.ArrowInvalid, match="Kubeflow-format ticket"):
            c.node(cluster.node_uris[0]).do_get(bad, options=c.call_options()).read_all()
    head = scrape(cluster.head.health)
    assert total(head, "icefloe_head_errors_total", rpc="GetFlightInfo", code="key_error") >= 1
    after = scrape_nodes(cluster)
    assert nodes_total(after, "icefloe_node_errors_total", rpc="DoGet", code="invalid") == \
        nodes_total(before, "icefloe_node_errors_total", rpc="DoGet", code="invalid") + 1


def _consume(client, name, job, sleep_s, batches, batch_size=256):
    """Reads `batches` batches as job `job`, sleeping `sleep_s` per batch
    (the training step; none at all when 0); returns the rows read."""
    rows = 0
    for batch in client.iter_epoch(name, batch_size=batch_size, prefetch=0, job=job):
        rows += batch.num_rows
        if sleep_s:
            time.sleep(sleep_s)
        batches -= 1
        if batches == 0:
            break
    return rows


def test_stall_share_per_job(cluster, table):
    """A consumer that does no work waits on data nearly all the time; one
    that sleeps per batch (a slow training step) hardly waits at all."""
    name = "stall"
    with cluster.client() as c:
        c.load(name, table.metadata_location)
        # Window batches are gathered on the nodes and merged here: with no
        # step at all, the loop spends its time in next().
        eager_rows = _consume(c, name, "eager-job", 0, 10**9, batch_size=2048)
        sleepy_rows = _consume(c, name, "sleepy-job", 0.1, 12)
        assert _stall.flush_all(timeout_s=30)
        jobs = {j["job"]: j for j in c.status()["jobs"]}
    assert jobs["eager-job"]["stall_ratio"] > 0.8, jobs["eager-job"]
    assert jobs["sleepy-job"]["stall_ratio"] < 0.3, jobs["sleepy-job"]
    assert jobs["eager-job"]["rows_total"] == eager_rows == ROWS - ROWS % 2048  # drop_last
    assert jobs["sleepy-job"]["rows_total"] == sleepy_rows == 12 * 256
    assert jobs["eager-job"]["datasets"] == [name]
    assert set(jobs["eager-job"]["nodes"]) <= set(cluster.node_uris)
    assert jobs["eager-job"]["nodes"]
    head = scrape(cluster.head.health)
    assert total(head, "icefloe_job_rows_total", job="eager-job") == eager_rows
    assert total(head, "icefloe_job_rows_total", job="sleepy-job") == 12 * 256
    assert total(head, "icefloe_job_stall_ratio", job="eager-job") > 0.8
    assert total(head, "icefloe_job_stall_ratio", job="sleepy-job") < 0.3
    assert total(head, "icefloe_job_rows_per_second", job="sleepy-job") > 0
    # The share from the counters (what a PromQL rate() ratio computes) agrees.
    wait = total(head, "icefloe_job_stall_seconds_total", job="sleepy-job")
    read = total(head, "icefloe_job_read_seconds_total", job="sleepy-job")
    assert 0 <= wait / read < 0.3


def test_job_name_from_environment(cluster, table, monkeypatch):
    monkeypatch.setenv("ICEFLOE_JOB", "from-env")
    monkeypatch.setenv("TRAIN_JOB_NAME", "kubeflow-job")
    assert _stall.job_name("explicit") == "explicit"
    assert _stall.job_name() == "from-env"
    monkeypatch.delenv("ICEFLOE_JOB")
    assert _stall.job_name() == "kubeflow-job"
    with cluster.client() as c:
        c.load("env", table.metadata_location)
        _consume(c, "env", None, 0, 3)
        assert _stall.flush_all(timeout_s=30)
        assert "kubeflow-job" in {j["job"] for j in c.status()["jobs"]}


def test_bad_report_is_refused_naming_the_field(cluster):
    with cluster.client() as c, pytest.raises(InvalidArgument, match="'wait_us'"):
        c._action("job.report", {"v": 1, "job": "j", "wait_us": 5, "elapsed_us": 1})
    assert total(scrape(cluster.head.health), "icefloe_head_job_reports_total",
                 outcome="invalid") >= 1


def test_unreachable_head_never_blocks_reporting():
    """A head that accepts connections but never answers: submitting stays
    immediate, the queue stays bounded, and reports are dropped."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    try:
        port = silent.getsockname()[1]
        r = _stall.Reporter(f"grpc://127.0.0.1:{port}", [], {})
        submitted = 5 * _stall.MAX_QUEUED_REPORTS
        done = threading.Event()

        def submit_all():
            for i in range(submitted):
                r.submit({"job": "j", "elapsed_us": 1 + i})
            done.set()

        threading.Thread(target=submit_all, daemon=True).start()
        # submit() never waits on the network: all of them return while the
        # first send is still stuck on the silent head (its deadline is 2 s).
        assert done.wait(timeout=_stall.SEND_TIMEOUT_S * 0.9 + 60) and r.sent == 0
        assert r.dropped >= submitted - _stall.MAX_QUEUED_REPORTS - 1
        assert r.flush(timeout_s=60)  # the rest are dropped after the first failure
        assert r.sent == 0 and r.failed >= 1
    finally:
        silent.close()


def test_dashboard_queries_use_exported_metrics(cluster, table):
    """Every metric a dashboard panel queries is in a scrape of a cluster
    that loaded a dataset and read an epoch under a job."""
    with cluster.client() as c:
        c.load("dash", table.metadata_location)
        _consume(c, "dash", "dash-job", 0, 5)
        assert _stall.flush_all(timeout_s=30)
    exported = {name for (name, _) in scrape(cluster.head.health)}
    for s in scrape_nodes(cluster):
        exported |= {name for (name, _) in s}
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 10
    functions = {"rate", "irate", "increase", "sum", "by", "histogram_quantile", "max", "min",
                 "avg", "le", "without", "clamp_min", "topk", "on", "time", "count", "bool",
                 "and", "or", "unless", "ignoring", "group_left"}
    for expr in exprs:
        # Metric names: identifiers outside label matchers and ranges.
        bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\"[^\"]*\"", " ", expr)
        names = {n for n in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", bare)
                 if n not in functions and not n.isdigit()}
        labels = set(re.findall(r"by \(([^)]*)\)", expr))
        names -= {x.strip() for ls in labels for x in ls.split(",")}
        assert names, expr
        for n in names:
            assert n in exported, f"{n} (in {expr!r}) is not exported"
    # Panels answer the questions: stall, speed, nodes, memory.
    titles = " ".join(p.get("title", "") for p in dashboard["panels"]).lower()
    for word in ("stall", "rows", "memory", "node"):
        assert word in titles, word


def test_idle_reporter_thread_ends_and_a_new_one_takes_over(monkeypatch):
    monkeypatch.setattr(_stall, "IDLE_EXIT_S", 0.2)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    uri = f"grpc://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()  # nothing listens: sends fail at once
    submit = _stall.submitter(uri, [], {})
    submit({"job": "j", "elapsed_us": 1})
    key = next(k for k in _stall._reporters if k[1] == uri)
    first = _stall._reporters[key]
    assert first.flush(timeout_s=30)
    deadline = time.monotonic() + 30
    while key in _stall._reporters:
        assert time.monotonic() < deadline, "the idle reporter did not end"
        time.sleep(0.05)
    first._thread.join(timeout=30)
    assert not first._thread.is_alive()
    submit({"job": "j", "elapsed_us": 1})
    assert _stall._reporters[key] is not first
    assert _stall._reporters[key].flush(timeout_s=30)
