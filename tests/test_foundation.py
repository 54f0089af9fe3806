"""The first thin slice: binaries start, serve a Parquet file, shut down cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request

import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest

from icefloe._bin import bin_path
from icefloe._process import ServerProcess


def test_binaries_print_help():
    for name in ("icefloe-head", "icefloe-node"):
        out = subprocess.run([bin_path(name), "--help"], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0
        assert out.stdout.startswith(f"usage: {name}")
        assert "--port" in out.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--bogus"], "unknown flag --bogus"),
        (["--port"], "--port needs a value"),
        (["--health-port=abc"], "--health-port: 'abc' is not an integer"),
        (["--port", "70000"], "port 70000 is out of range"),
        (["--parquet", "/nonexistent/file.parquet"], "/nonexistent/file.parquet"),
        (["--load-threads", "0"], "--load-threads must be in 1..64, got 0"),
        (["--load-threads", "65"], "--load-threads must be in 1..64, got 65"),
    ],
)
def test_bad_flags_exit_non_zero_with_a_clear_message(args, message):
    out = subprocess.run(
        [bin_path("icefloe-node"), *args], capture_output=True, text=True, timeout=30
    )
    assert out.returncode != 0
    assert message in out.stderr


def test_port_in_use_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = subprocess.run(
            [bin_path("icefloe-head"), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert out.returncode != 0
    assert f"cannot listen on grpc+tcp://127.0.0.1:{port}" in out.stderr


@pytest.fixture
def parquet_node(small_parquet, tmp_path):
    """A lone data node serving the small Parquet file as dataset 'small'."""
    path, _ = small_parquet
    node = ServerProcess(
        name="node",
        argv=[bin_path("icefloe-node"), "--parquet", path, "--name", "small",
              "--batch-rows", "5000"],
        log_path=tmp_path / "node.log",
    ).start()
    yield node
    node.stop()


def test_node_serves_parquet_identical_to_pyarrow(small_parquet, parquet_node):
    path, _ = small_parquet
    node = flight.connect(parquet_node.location)
    infos = list(node.list_flights())
    assert [i.descriptor.path for i in infos] == [[b"small"]]
    info = infos[0]
    assert info.total_records == 50_000
    assert info.schema.equals(pq.read_schema(path))
    endpoint = info.endpoints[0]
    assert endpoint.locations[0].uri.decode() == parquet_node.location
    table = node.do_get(endpoint.ticket).read_all()
    assert table.equals(pq.read_table(path))
    # The cached batches are served as they are held: batch_rows rows each.
    assert max(len(c) for c in table.column(0).chunks) <= 5000
    # Calls a node does not implement say so cleanly.
    with pytest.raises(pa.ArrowNotImplementedError):
        node.get_flight_info(flight.FlightDescriptor.for_path("small"))


def test_health_endpoints_and_graceful_sigterm(small_parquet, tmp_path):
    path, _ = small_parquet
    node = ServerProcess(
        name="node",
        argv=[bin_path("icefloe-node"), "--parquet", path],
        log_path=tmp_path / "node.log",
    ).start()
    try:
        for route, body in (("/healthz", b"ok"), ("/ready", b"ready")):
            with urllib.request.urlopen(node.health + route, timeout=10) as resp:
                assert resp.status == 200
                assert resp.read() == body
        node.popen.send_signal(signal.SIGTERM)
        assert node.popen.wait(timeout=20) == 0
        assert "shutting down" in node.tail()
    finally:
        node.stop()


def test_tampered_ticket_is_rejected(parquet_node):
    node = flight.connect(parquet_node.location)
    for bad in (b"", b"\xff", b"\xffIF\x09\x01\x00", b"\xffIF\x01\x07\x00"):
        with pytest.raises(pa.ArrowInvalid, match="Invalid ticket format"):
            node.do_get(flight.Ticket(bad)).read_all()
    # The node keeps serving after bad input.
    info = next(iter(node.list_flights()))
    assert node.do_get(info.endpoints[0].ticket).read_all().num_rows == 50_000


@pytest.mark.parametrize("env, applied", [
    ({}, True),
    ({"ICEFLOE_MALLOC_TUNING": "0"}, False),
    ({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1048576"}, False),
    ({"MALLOC_MMAP_THRESHOLD_": "1048576"}, False),
])
def test_client_malloc_tuning_is_once_and_yields_to_the_user(env, applied):
    # A fresh interpreter: the tuning is per process. The second call is a no-op.
    code = ("from icefloe import _malloc; "
            "print(_malloc.tune_for_streaming(), _malloc.tune_for_streaming())")
    clean = {k: v for k, v in os.environ.items()
             if k not in ("ICEFLOE_MALLOC_TUNING", "GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_",
                          "MALLOC_TRIM_THRESHOLD_")}
    out = subprocess.run([sys.executable, "-c", code], env={**clean, **env},
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(applied), "False"]
