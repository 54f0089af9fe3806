"""Wire: cached record batches from one data node into client memory.

One and several (2, 4) parallel DoGet streams into a C++ client
(benchmarks/cpp/flight_read_bench) and into Python (pyarrow.flight, read into
Arrow, no conversion), against iperf3 over loopback measured in the same run.
Each stream reads a disjoint share of the table, on its own TCP connection
(also: 4 streams sharing one gRPC connection). The same table served by a plain
pyarrow.flight server over grpc+tcp and grpc+unix shows what a unix socket
would change (icefloe-node listens on TCP only). While the C++ client reads,
perf samples the node (when perf works), for benchmarks/README.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from typing import Any

from . import common
from .common import Env

NAME = "wire"


def _cpp(binary: str, location: str, tickets: list[bytes], streams: int, server_pid: int,
         repeat: int = 4, shared: bool = False) -> dict[str, float]:
    """The C++ client; the median GB/s of its runs after the first (which warms the
    connections up) and CPU seconds per GB of client and server over all runs."""
    argv = [binary, "--location", location, "--streams", str(streams), "--repeat", str(repeat)]
    for t in tickets:
        argv += ["--ticket", t.hex()]
    if shared:
        argv.append("--shared-connection")
    server0 = common.cpu_seconds(server_pid)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    server_cpu = common.cpu_seconds(server_pid) - server0
    if out.returncode != 0:
        raise RuntimeError(f"flight_read_bench failed: {out.stderr}")
    runs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return _result(runs, server_cpu)


def _result(runs: list[dict[str, Any]], server_cpu: float) -> dict[str, float]:
    gb = sum(r["bytes"] for r in runs) / 1e9
    client_cpu = sum(r["cpu_seconds"] for r in runs)
    return {"gbps": common.median(r["gbps"] for r in runs[1:] or runs),
            "client_cpu_s_per_gb": client_cpu / gb,
            "server_cpu_s_per_gb": server_cpu / gb,
            "cpu_s_per_gb": (client_cpu + server_cpu) / gb}


def _py(location: str, tickets: list[bytes], streams: int, server_pid: int,
        shared: bool = False) -> dict[str, float]:
    server0 = common.cpu_seconds(server_pid)
    runs = common.run_worker("wire", {"location": location, "tickets": [t.hex() for t in tickets],
                                      "streams": streams, "repeat": 4,
                                      "shared_connection": shared})
    return _result(runs, common.cpu_seconds(server_pid) - server0)


def _profile(binary: str, location: str, ticket: bytes, node_pid: int, repeat: int,
             env: Env) -> dict[str, Any] | None:
    """perf record of the node and of the C++ client (separately) while one stream
    is read over and over; the top symbols of each."""
    if shutil.which("perf") is None:
        return None
    data = {"node": env.logs / "node.perf", "client": env.logs / "client.perf"}
    # The client runs under perf (its reading threads start per read); the node is
    # attached to while the client reads (~5 s of reads).
    client = subprocess.Popen(["perf", "record", "-F", "499", "-g", "-o", str(data["client"]),
                               "--", binary, "--location", location, "--ticket", ticket.hex(),
                               "--repeat", str(repeat)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out: dict[str, Any] = {}
    try:
        time.sleep(0.5)
        subprocess.run(["perf", "record", "-F", "499", "-g", "-p", str(node_pid), "-o",
                        str(data["node"]), "--", "sleep", "4"], capture_output=True, timeout=60)
    finally:
        client.wait(timeout=600)
    text = []
    for who, path in data.items():
        if not path.exists():
            out[who] = {"error": "perf record failed"}
            continue
        reports = {}
        for key, sort in (("by_dso", "dso"), ("top_symbols", "dso,symbol")):
            rep = subprocess.run(["perf", "report", "-i", str(path), "--stdio", "--no-children",
                                  "--sort", sort, "-g", "none", "--percent-limit", "0.8"],
                                 capture_output=True, text=True)
            reports[key] = [" ".join(line.split()) for line in rep.stdout.splitlines()
                            if line.strip() and not line.startswith("#")][:25]
            text += [f"== {who}: {key}", *reports[key], ""]
        out[who] = reports
    (env.cfg.out / "wire-perf.txt").write_text("\n".join(text) + "\n")
    return out


def run(env: Env) -> dict[str, Any]:
    cfg, log = env.cfg, env.log
    import icefloe

    table = env.table
    binary = common.find_cpp_bench()
    if binary is None:
        log("wire: flight_read_bench not built (CMake target in benchmarks/cpp); C++ rows skipped")
    limits = {"memcpy_gbps": common.memcpy_gbps()}
    iperf_s = 1.5 if cfg.quick else 3.0
    with icefloe.LocalCluster(num_nodes=1, memory_limit=None,
                              log_dir=env.log_dir("wire")) as cluster, cluster.client() as client:
        desc = client.load("wire", table.metadata_location)
        rows = desc["rows"]
        info = client.flight_info("wire")
        location = info.endpoints[0].locations[0].uri.decode()
        node = cluster.nodes[0].popen.pid

        def tickets(k: int) -> list[bytes]:
            """k range tickets splitting the rows evenly, signed by the head
            (LocalCluster's nodes accept only signed tickets)."""
            out = []
            for i in range(k):
                part = client.flight_info("wire", i * rows // k, (i + 1) * rows // k)
                out.extend(e.ticket.ticket for e in part.endpoints)
            assert len(out) == k, f"{k} ranges of one node's rows gave {len(out)} endpoints"
            return out

        split = {k: tickets(k) for k in (1, 2, 4)}  # asked once; every round reads them

        tcp = common.start_pyflight(table.files, cfg.cache_batch_rows,
                                    env.log_dir("wire") / "pyflight-tcp.log")
        unix = common.start_pyflight(table.files, cfg.cache_batch_rows,
                                     env.log_dir("wire") / "pyflight-unix.log",
                                     location=f"grpc+unix://{env.logs / 'pyflight.sock'}")
        try:
            measures: dict[str, Any] = {
                "iperf3 1 stream": lambda: common.iperf3(iperf_s),
                "iperf3 4 streams": lambda: common.iperf3(iperf_s, 4),
            }
            for k in (1, 2, 4):
                plural = "s" * (k > 1)
                if binary:
                    measures[f"C++ {k} stream{plural}"] = \
                        lambda k=k: _cpp(binary, location, split[k], k, node)
                measures[f"Python {k} stream{plural}"] = \
                    lambda k=k: _py(location, split[k], k, node)
            if binary:
                measures["C++ 4 streams, 1 connection"] = \
                    lambda: _cpp(binary, location, split[4], 4, node, shared=True)
                measures["C++ 1 stream, pyarrow server tcp"] = \
                    lambda: _cpp(binary, tcp.location, [b"all"], 1, tcp.popen.pid)
                measures["C++ 1 stream, pyarrow server unix"] = \
                    lambda: _cpp(binary, unix.location, [b"all"], 1, unix.popen.pid)
            log(f"wire: {rows:,} rows, {desc['bytes'] / 1e9:.2f} GB cached on one node")
            got = common.interleaved(list(measures), cfg.repeats, lambda v, r: measures[v](), log)
            repeat = max(3, int(6e9 / desc["bytes"]))  # ~5 s of reads
            profile = _profile(binary, location, split[1][0], node, repeat, env) \
                if binary else None
        finally:
            tcp.stop()
            unix.stop()

    med = {k: common.median(r["gbps"] for r in v) for k, v in got.items()}
    cpu = {k: common.median(r["cpu_s_per_gb"] for r in v) for k, v in got.items()}
    iperf = med["iperf3 1 stream"]
    cores = os.cpu_count() or 1
    rows_out = []
    for k, v in got.items():
        g = [r["gbps"] for r in v]
        rows_out.append([k, med[k], min(g), max(g), med[k] / iperf, cpu[k], cores / cpu[k]])
    text = common.print_table(
        f"wire: one data node -> client memory ({desc['bytes'] / 1e9:.2f} GB per read); "
        f"memcpy {limits['memcpy_gbps']:.1f} GB/s on one core",
        ["variant", "GB/s", "min", "max", "x iperf3", "CPU s/GB (both ends)",
         f"GB/s if CPU-bound on {cores} cores"], rows_out)

    targets = []
    for kind in ("C++", "Python"):
        one = f"{kind} 1 stream"
        if one not in got:
            continue
        best_par = max((f"{kind} {k} streams" for k in (2, 4)), key=lambda v: med[v])
        targets.append(common.target(
            f"one DoGet stream -> {kind} client memory / iperf3 loopback (1 stream)",
            ">=", 0.8, common.paired_ratio(got, one, "iperf3 1 stream")))
        targets.append(common.target(
            f"parallel streams ({kind} client, best of 2 and 4) / one stream", ">=", 1.5,
            common.paired_ratio(got, best_par, one)))
    one_cpp = "C++ 1 stream" if binary else "Python 1 stream"
    notes = [
        "icefloe-node listens on TCP only (--host/--port): there is no grpc+unix:// endpoint; "
        "the pyarrow-server rows show what a unix socket changes for the same bytes.",
        f"CPU per GB moved: iperf3 {cpu['iperf3 1 stream']:.2f} s/GB (both ends), Flight "
        f"{cpu[one_cpp]:.2f} s/GB ({one_cpp}); with {cores} cores shared by server and client "
        f"the CPU allows at most {cores / cpu[one_cpp]:.2f} GB/s for Flight. iperf3 with 4 "
        f"streams reaches {med['iperf3 4 streams'] / iperf:.2f}x one stream: on {cores} cores "
        "parallel streams add no CPU, so they cannot add throughput.",
    ]
    labels = list(got)
    common.bar_plot(cfg, NAME, "wire: GB/s into client memory (median of 3, min-max)", labels,
                    [med[k] for k in labels], lows=[min(r["gbps"] for r in got[k]) for k in labels],
                    highs=[max(r["gbps"] for r in got[k]) for k in labels],
                    lines=[(0.8 * iperf, "0.8 x iperf3")],
                    colors=["#999999" if k.startswith("iperf3") else "#4477aa" for k in labels])
    result = {"name": NAME, "rows": rows, "bytes": desc["bytes"], "runs": got, "median_gbps": med,
              "median_cpu_s_per_gb": cpu,
              "limits": {**limits, "iperf3_1_gbps": iperf,
                         "iperf3_4_gbps": med["iperf3 4 streams"]},
              "targets": targets, "notes": notes, "profile": profile, "table": text}
    common.write_result(cfg, NAME, result)
    return result
