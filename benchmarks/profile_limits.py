"""Profiles behind issue 15's missed goals: where the CPU of an epoch and of a
take goes, and what the transport alone costs on this machine.

    python -m benchmarks.profile_limits [--rounds 5] [--out /tmp/profiles] [--parts ...]

Parts (each figure a median of interleaved rounds, every reader and server in
its own process; CPU time from the process itself or /proc, never wall time):

- ``epoch``: CacheDataset shuffle none, 0 DataLoader workers, 2 local nodes, at
  batch 1024 / 4096 / 65536: training-process and node+head CPU-s per GB and
  per batch; then one ``perf record -g`` run per batch size of the trainer and
  of the nodes (enabled only around the epochs, through perf's control fifo),
  grouped by library/symbol class.
- ``take``: Client.take of 1 and 4096 rows against a bare DoGet of the same
  kind-04 ticket to the node, a one-row DoGet to a trivial Python Flight
  server, and pyarrow.Table.take in process; client and node CPU per call.
- ``transport``: a plain pyarrow.flight server and client (two processes)
  streaming the table's 76-byte rows in 4096- and 65536-row batches over
  grpc+tcp://127.0.0.1 and grpc+unix:///tmp/...: CPU-s per GB at each end,
  GB/s, and a one-row DoGet round trip.
- ``variants`` (not in the default set): the trainer's CPU per batch at 1024
  and 65536 with the DataLoader, with ``prefetch=0``, and iterating the
  dataset directly: which Python layer the per-batch cost sits in.

``--call-graph dwarf`` records full call chains and adds a per-stage split
(STAGES: receive copy, Flight's copy, concat, torch conversion, ...);
``python -m benchmarks.profile_limits summarize FILE.data...`` prints it for
existing perf data. perf data and reports go under --out (never the worktree). Needs perf and the
benchmarks' quick table (built once by benchmarks/common.py if missing).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import common

BATCHES = (1024, 4096, 65536)

# -- perf --------------------------------------------------------------------------

# (category, dso regex, symbol regex or None): the first match wins.
CATEGORIES = [
    ("kernel (syscalls, recv/send copies, scheduling)", r"kernel", None),
    ("memcpy/memmove (user copies)", r"libc", r"mem(cpy|move)"),
    ("libc malloc/free", r"libc", r"(malloc|free|realloc|_int_|cfree|tcache)"),
    ("libc other (locks, futex wrappers)", r"libc", None),
    ("gRPC/protobuf/absl (in libarrow_flight)", r"libarrow_flight",
     r"(grpc|absl|protobuf|google::|gpr_|tsi_|chttp2|^upb|re2|cq_|Closure|Combiner)"),
    ("Arrow Flight (libarrow_flight)", r"libarrow_flight", None),
    ("Arrow IPC decode/encode", r"libarrow\.so", r"(ipc|flatbuf|Message|Reader|Writer)"),
    ("Arrow allocator (jemalloc/mimalloc)", r"libarrow\.so", r"(je_|jemalloc|mi_|arena)"),
    ("Arrow other (libarrow)", r"libarrow", None),
    ("pyarrow bindings (lib/_flight .so, libarrow_python)", r"(lib\.cpython|_flight|arrow_python)",
     None),
    ("libtorch/c10", r"(torch|c10)", None),
    ("numpy", r"(multiarray|numpy|openblas)", None),
    ("CPython interpreter", r"(python3|libpython)", None),
    ("C++ runtime (libstdc++/libgcc)", r"(stdc\+\+|libgcc)", None),
    ("icefloe node/head binaries", r"icefloe", None),
]


def categorize(dso: str, sym: str) -> str:
    for name, dso_re, sym_re in CATEGORIES:
        if re.search(dso_re, dso) and (sym_re is None or re.search(sym_re, sym)):
            return name
    return f"other ({dso})"


def perf_self(data: Path) -> list[tuple[float, str, str]]:
    """(percent of samples, dso, symbol) by self time, from perf report."""
    out = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort",
                          "dso,sym", "--stdio", "-g", "none", "--percent-limit", "0"],
                         capture_output=True, text=True, timeout=300).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[[.kKuHg]\]\s+(.*)$", line)
        if m:
            rows.append((float(m[1]), m[2], m[3].strip()))
    return rows


# (stage, regex over a sample's whole call chain): the first match wins; only
# meaningful with --call-graph dwarf (frame pointers lose the Arrow/gRPC frames).
STAGES = [
    ("Flight: message copied out of gRPC slices (FlightDataDeserialize)", r"FlightDataDeserialize"),
    ("icefloe assemble: Arrow Concatenate copy", r"Concatenate"),
    ("icefloe node code (plan/piece stream, row gather)", r"icefloe::"),
    ("Flight/IPC serialize (sender)", r"(SerializeToByteBuffer|FlightDataSerialize|ipc::.*Write)"),
    ("Arrow IPC decode", r"arrow::ipc::"),
    ("socket receive: recvmsg (kernel copy, page faults of fresh slices)", r"recvmsg"),
    ("socket send: sendmsg (kernel copy + loopback TCP incl. receiver softirq)", r"sendmsg"),
    ("thread hand-offs (futex, epoll, scheduling)", r"(futex|epoll|schedule|nanosleep)"),
    ("gRPC slices: malloc/free, page faults", r"(MakeSlice|slice_unref|slice_buffer|sysmalloc)"),
    ("gRPC other (chttp2 framing, closures, timers)", r"(grpc|absl)"),
    ("client Take to request order (Arrow compute)", r"TakeImpl|compute::"),
    ("benchmark's own byte count (tensor element_size/nelement)",
     r"THPVariable_(element_size|numel|nelement)"),
    ("torch conversion (DLPack, tensor objects)", r"(torch|THP|dlpack|c10::)"),
    ("numpy", r"(multiarray|numpy)"),
    ("pyarrow bindings (read_chunk, RecordBatch wrappers)", r"(__pyx_|arrow::py::)"),
    ("Python interpreter (icefloe / torch.py glue)", r"(_PyEval|PyObject|libpython)"),
]


def perf_stages(data: Path) -> dict[str, float]:
    """Percent of samples per pipeline stage (STAGES), from perf script's call chains."""
    out = subprocess.run(["perf", "script", "--no-inline", "-i", str(data),
                          "-F", "comm,ip,sym,dso"],
                         capture_output=True, text=True, timeout=600).stdout
    counts: dict[str, int] = {}
    total = 0
    for sample in out.split("\n\n"):
        frames = sample.strip().splitlines()[1:]
        if not frames:
            continue
        chain = "\n".join(frames)
        stage = next((name for name, pat in STAGES if re.search(pat, chain)), None)
        if stage is None:
            leaf = frames[0].rsplit("(", 1)[-1].rstrip(")")
            stage = f"other ({Path(leaf).name})"
        counts[stage] = counts.get(stage, 0) + 1
        total += 1
    return {k: 100 * v / total for k, v in sorted(counts.items(), key=lambda kv: -kv[1])}


def summarize(data: Path, top: int = 15) -> dict[str, Any]:
    rows = perf_self(data)
    cats: dict[str, float] = {}
    for pct, dso, sym in rows:
        c = categorize(dso, sym)
        cats[c] = cats.get(c, 0.0) + pct
    return {"categories": dict(sorted(cats.items(), key=lambda kv: -kv[1])),
            "stages": perf_stages(data) if Perf.call_graph == "dwarf" else None,
            "top": [{"pct": p, "dso": d, "sym": s[:110]} for p, d, s in rows[:top]]}


class Perf:
    """``perf record -g`` of a command or of running pids, started disabled and
    switched on and off through its control fifo (so imports are not profiled)."""

    call_graph = "fp"  # or "dwarf" (--call-graph): frame pointers miss most of Arrow/gRPC

    def __init__(self, out: Path, name: str, target: list[str]) -> None:
        self.data = out / f"{name}.data"
        self.ctl, self.ack = out / f"{name}.ctl", out / f"{name}.ack"
        for f in (self.ctl, self.ack):
            f.unlink(missing_ok=True)
            os.mkfifo(f)
        self.argv = ["perf", "record", "--call-graph", self.call_graph, "-F", "999",
                     "-o", str(self.data), "-D", "-1",
                     "--control", f"fifo:{self.ctl},{self.ack}", *target]

    def control(self) -> str:
        return f"{self.ctl}:{self.ack}"

    def cleanup(self) -> None:
        for f in (self.ctl, self.ack):
            f.unlink(missing_ok=True)


def perf_switch(controls: str, cmd: str) -> None:
    """Sends enable/disable to each perf control fifo in ``controls`` and waits for acks."""
    for pair in filter(None, controls.split(";")):
        ctl, ack = pair.split(":")
        with open(ctl, "w") as c:
            c.write(cmd + "\n")
        with open(ack) as a:
            a.readline()


# -- workers (run in fresh interpreters) ---------------------------------------------


def worker_epoch(head: str, dataset: str, batch_size: int, epochs: int, perf: str = "",
                 variant: str = "dataloader") -> dict[str, Any]:
    """``epochs`` sequential epochs (CacheDataset none, num_workers=0) into tensors.
    ``variant``: "dataloader" (as a user runs it), "prefetch0" (no background
    thread), "direct" (iterating the dataset without a DataLoader)."""
    from torch.utils.data import DataLoader

    from benchmarks.measure import BatchCounter
    from icefloe.torch import CacheDataset

    ds = CacheDataset(head, dataset, batch_size=batch_size, shuffle="none", drop_last=False,
                      prefetch=0 if variant == "prefetch0" else None)

    def loader() -> Any:
        return ds if variant == "direct" else DataLoader(ds, batch_size=None, num_workers=0)

    ds.set_epoch(0)
    next(iter(loader()))  # connect before the clock
    perf_switch(perf, "enable")
    cpu0, t0 = time.process_time(), time.perf_counter()
    count = BatchCounter()
    for e in range(epochs):
        ds.set_epoch(e + 1)
        for tensors in loader():
            count.add(tensors)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    perf_switch(perf, "disable")
    return {"rows": count.rows, "bytes": count.bytes, "batches": count.batches, "cpu_s": cpu,
            "wall_s": wall}


def _timed(fn: Any, calls: int) -> tuple[list[float], float]:
    """Per-call ms and CPU ms per call of ``calls`` calls of fn()."""
    times = []
    cpu0 = time.process_time()
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times, (time.process_time() - cpu0) * 1e3 / calls


def worker_take(head: str, dataset: str, rows: int, pyflight: str, paths: list[str],
                node_pids: list[int], calls: int, seed: int) -> dict[str, Any]:
    """Client.take vs a bare DoGet of the ticket take builds, vs a trivial server."""
    import numpy as np
    import pyarrow.flight as flight
    import pyarrow.parquet as pq

    from icefloe import Client

    rng = np.random.default_rng(seed)
    client = Client(head)
    client.take(dataset, [0])
    smap = client._slice_maps.get(dataset, None)
    table = pq.read_table(paths).combine_chunks()
    py = flight.connect(pyflight)
    py.do_get(flight.Ticket(b"one")).read_all()
    node_cpu = lambda: sum(common.cpu_seconds(p) for p in node_pids)  # noqa: E731
    out: dict[str, Any] = {}
    for n in (1, 4096):
        k = calls if n == 1 else max(20, calls // 10)
        out |= _take_size(client, smap, table, dataset, n,
                          [rng.integers(0, rows, n) for _ in range(k)], node_cpu)
    ms, cpu_ms = _timed(lambda: py.do_get(flight.Ticket(b"one")).read_all(), calls)
    out["1 DoGet to trivial Python server"] = {"ms": float(np.median(ms)),
                                               "client_cpu_ms": cpu_ms}
    return out


def _take_size(client: Any, smap: Any, table: Any, dataset: str, n: int, idx: list[Any],
               node_cpu: Any) -> dict[str, Any]:
    """Median ms and client/node CPU ms per call of each way to take ``idx``."""
    import numpy as np
    import pyarrow.flight as flight

    k = len(idx)
    groups = [smap.groups(i) for i in idx]
    it = iter(range(10**9))

    def take() -> None:
        assert client.take(dataset, idx[next(it) % k]).num_rows == n

    def bare() -> None:
        # The same kind-04 tickets, one DoGet per node, read to a table.
        gs = groups[next(it) % k]
        readers = [client.node(g.nodes[0]).do_get(flight.Ticket(g.ticket)) for g in gs]
        assert sum(r.read_all().num_rows for r in readers) == n

    def tickets() -> None:
        smap.groups(idx[next(it) % k])

    def inproc() -> None:
        table.take(idx[next(it) % k])

    out = {}
    for name, fn in [("take", take), ("bare DoGet to node", bare),
                     ("build tickets", tickets), ("in-process Table.take", inproc)]:
        c0 = node_cpu()
        ms, cpu_ms = _timed(fn, k)
        out[f"{n} {name}"] = {"ms": float(np.median(ms)), "client_cpu_ms": cpu_ms,
                              "node_cpu_ms": (node_cpu() - c0) * 1e3 / k}
    return out


def worker_stream(location: str, ticket: str, repeat: int, server_pid: int) -> dict[str, Any]:
    """Reads a stream ``repeat`` times (chunks only, no conversion): CPU at both ends."""
    import numpy as np
    import pyarrow.flight as flight

    client = flight.connect(location)
    client.do_get(flight.Ticket(b"one")).read_all()
    s0, cpu0, t0 = common.cpu_seconds(server_pid), time.process_time(), time.perf_counter()
    nbytes = 0
    for _ in range(repeat):
        for chunk in client.do_get(flight.Ticket(ticket.encode())):
            nbytes += chunk.data.nbytes
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    server = common.cpu_seconds(server_pid) - s0
    ms, _ = _timed(lambda: client.do_get(flight.Ticket(b"one")).read_all(), 300)
    return {"gb": nbytes / 1e9, "gbps": nbytes / 1e9 / wall,
            "client_cpu_s_per_gb": cpu / (nbytes / 1e9),
            "server_cpu_s_per_gb": server / (nbytes / 1e9), "one_row_ms": float(np.median(ms))}


def serve(location: str, paths: list[str]) -> None:
    """A trivial pyarrow.flight server: tickets "4096", "65536" (the table in
    batches of that many rows) and "one" (a one-row batch)."""
    import pyarrow as pa
    import pyarrow.flight as flight
    import pyarrow.parquet as pq

    table = pq.read_table(paths).combine_chunks()
    tables = {str(b): pa.Table.from_batches(table.to_batches(max_chunksize=b))
              for b in (4096, 65536)}
    tables["one"] = table.slice(12345, 1)

    class Server(flight.FlightServerBase):
        def do_get(self, context, ticket):  # noqa: ARG002
            return flight.RecordBatchStream(tables[ticket.ticket.decode()])

    server = Server(location)
    where = location if location.startswith("grpc+unix") else f"grpc://127.0.0.1:{server.port}"
    print(f"ready {where}", flush=True)
    server.serve()


def _worker(name: str, args: dict[str, Any], timeout_s: float = 600,
            prefix: list[str] | None = None) -> Any:
    argv = [*(prefix or []), sys.executable, "-m", "benchmarks.profile_limits", "worker", name,
            json.dumps(args)]
    out = subprocess.run(argv, cwd=common.ROOT, env=common.child_env(), capture_output=True,
                         text=True, timeout=timeout_s)
    if out.returncode != 0:
        raise RuntimeError(f"{name} failed ({out.returncode}): {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


class _Server:
    """serve() in its own process, until stop()."""

    def __init__(self, location: str, paths: list[str]) -> None:
        argv = [sys.executable, "-m", "benchmarks.profile_limits", "serve", location,
                json.dumps(paths)]
        self.popen = subprocess.Popen(argv, cwd=common.ROOT, env=common.child_env(),
                                      stdout=subprocess.PIPE, text=True)
        line = self.popen.stdout.readline()  # bounded: the server prints it or exits
        if not line.startswith("ready "):
            self.stop()
            raise RuntimeError(f"server at {location} did not start: {line!r}")
        self.location = line.split()[1]

    def stop(self) -> None:
        self.popen.kill()
        self.popen.wait(timeout=30)


# -- parts -----------------------------------------------------------------------


def _profiled(cluster: Any, out: Path, name: str, worker: str,
              args: dict[str, Any]) -> dict[str, Any]:
    """One run of a worker under perf, and perf on the nodes, both switched on
    by the worker around its measured loop; their self-time summaries."""
    nodes = [n.popen.pid for n in cluster.nodes]
    node_perf = Perf(out, f"nodes-{name}", ["-p", ",".join(map(str, nodes))])
    client_perf = Perf(out, f"client-{name}", [])
    node_proc = subprocess.Popen(node_perf.argv, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
    try:
        res = _worker(worker, {**args, "perf": f"{client_perf.control()};{node_perf.control()}"},
                      prefix=[*client_perf.argv, "--"])
    finally:
        node_proc.send_signal(2)
        node_proc.wait(timeout=60)
        node_perf.cleanup()
        client_perf.cleanup()
    return {"client": summarize(client_perf.data), "nodes": summarize(node_perf.data),
            "run": res}


def worker_take_loop(head: str, dataset: str, rows: int, n: int, calls: int,
                     perf: str = "") -> dict[str, Any]:
    """``calls`` takes of n random rows, profiled (see _profiled)."""
    import numpy as np

    from icefloe import Client

    client = Client(head)
    client.take(dataset, [0])
    idx = [np.random.default_rng(7).integers(0, rows, n) for _ in range(calls)]
    perf_switch(perf, "enable")
    cpu0, t0 = time.process_time(), time.perf_counter()
    for i in idx:
        client.take(dataset, i)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    perf_switch(perf, "disable")
    return {"calls": calls, "ms_per_call": wall * 1e3 / calls, "cpu_ms_per_call": cpu * 1e3 / calls}


def part_epoch(cluster: Any, rounds: int, epochs: int, out: Path, log: Any) -> dict[str, Any]:
    servers = [n.popen.pid for n in cluster.nodes] + [cluster.head.popen.pid]
    nodes = [n.popen.pid for n in cluster.nodes]
    runs: dict[int, list[dict[str, Any]]] = {b: [] for b in BATCHES}
    for r in range(rounds):
        for b in BATCHES:
            s0 = sum(common.cpu_seconds(p) for p in servers)
            n0 = sum(common.cpu_seconds(p) for p in nodes)
            res = _worker("epoch", {"head": cluster.head_uri, "dataset": "p", "batch_size": b,
                                    "epochs": epochs})
            res["server_cpu_s"] = sum(common.cpu_seconds(p) for p in servers) - s0
            res["node_cpu_s"] = sum(common.cpu_seconds(p) for p in nodes) - n0
            runs[b].append(res)
            log(f"  round {r} batch {b}: trainer {res['cpu_s'] / (res['bytes'] / 1e9):.2f} "
                f"CPU-s/GB, servers {res['server_cpu_s'] / (res['bytes'] / 1e9):.2f}, "
                f"{res['bytes'] / 1e9 / res['wall_s']:.2f} GB/s")
    profiles = {}
    for b in BATCHES:
        profiles[b] = _profiled(cluster, out, f"epoch-{b}", "epoch", {
            "head": cluster.head_uri, "dataset": "p", "batch_size": b, "epochs": epochs})
        log(f"  perf batch {b}: done")
    return {"runs": runs, "profiles": profiles}


def part_variants(cluster: Any, rounds: int, epochs: int, log: Any) -> dict[str, Any]:
    """The trainer's CPU with and without the DataLoader and the prefetch thread
    (which Python layers the per-batch cost sits in), at batch 1024 and 65536."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for r in range(rounds):
        for v, b in (("dataloader", 1024), ("prefetch0", 1024), ("direct", 1024),
                     ("dataloader", 65536), ("direct", 65536)):
            res = _worker("epoch", {"head": cluster.head_uri, "dataset": "p", "batch_size": b,
                                    "epochs": epochs, "variant": v})
            runs.setdefault(f"{v} @{b}", []).append(res)
            log(f"  round {r} {v} @{b}: {res['cpu_s'] / res['batches'] * 1e6:.0f} "
                f"CPU-µs/batch, {res['bytes'] / 1e9 / res['wall_s']:.2f} GB/s")
    return runs


def part_take(cluster: Any, paths: list[str], rows: int, rounds: int, out: Path,
              log: Any) -> dict[str, Any]:
    server = _Server("grpc://127.0.0.1:0", paths)
    try:
        got = []
        for r in range(rounds):
            got.append(_worker("take", {"head": cluster.head_uri, "dataset": "p", "rows": rows,
                                        "pyflight": server.location, "paths": paths,
                                        "node_pids": [n.popen.pid for n in cluster.nodes],
                                        "calls": 400, "seed": r}))
            log(f"  take round {r}: " + ", ".join(f"{k} {v['ms']:.3f} ms"
                                                  for k, v in got[-1].items()))
    finally:
        server.stop()
    profiles = {n: _profiled(cluster, out, f"take-{n}", "take_loop", {
        "head": cluster.head_uri, "dataset": "p", "rows": rows, "n": n, "calls": calls})
        for n, calls in ((1, 3000), (4096, 300))}
    return {"rounds": got, "profiles": profiles}


def part_transport(paths: list[str], rounds: int, log: Any) -> dict[str, Any]:
    sock = Path(tempfile.mkdtemp(prefix="icefloe-prof-")) / "flight.sock"
    got: dict[str, list[dict[str, Any]]] = {}
    servers = {"tcp": _Server("grpc://127.0.0.1:0", paths),
               "unix": _Server(f"grpc+unix://{sock}", paths)}
    try:
        for r in range(rounds):
            for kind, srv in servers.items():
                for b in ("4096", "65536"):
                    res = _worker("stream", {"location": srv.location, "ticket": b, "repeat": 8,
                                             "server_pid": srv.popen.pid})
                    got.setdefault(f"{kind} {b}", []).append(res)
                    log(f"  transport round {r} {kind} {b}: {res}")
    finally:
        for srv in servers.values():
            srv.stop()
        sock.unlink(missing_ok=True)
        sock.parent.rmdir()
    return got


def main() -> None:
    if sys.argv[1:2] == ["worker"]:
        fn = {"epoch": worker_epoch, "take": worker_take, "stream": worker_stream,
              "take_loop": worker_take_loop}[sys.argv[2]]
        print("\n" + json.dumps(fn(**json.loads(sys.argv[3]))), flush=True)
        return
    if sys.argv[1:2] == ["summarize"]:  # summarize FILE.data... (dwarf call graphs)
        Perf.call_graph = "dwarf"
        print(json.dumps({f: summarize(Path(f)) for f in sys.argv[2:]}, indent=1))
        return
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], json.loads(sys.argv[3]))
        return
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--epochs", type=int, default=4, help="epochs per measured run")
    p.add_argument("--out", type=Path, default=Path("/tmp/profiles"))
    p.add_argument("--parts", nargs="+", default=["epoch", "take", "transport"],
                   choices=["epoch", "take", "transport", "variants"])
    p.add_argument("--call-graph", default="fp", choices=["fp", "dwarf"])
    a = p.parse_args()
    Perf.call_graph = a.call_graph
    a.out.mkdir(parents=True, exist_ok=True)
    import icefloe

    def log(msg: str) -> None:
        print(msg, flush=True)

    cfg = common.Config.make(quick=True, out=a.out)
    table = common.build_table(cfg, log)
    result: dict[str, Any] = {"uptime_start": os.getloadavg()}
    if "transport" in a.parts:
        result["transport"] = part_transport(table.files, a.rounds, log)
    if {"epoch", "take", "variants"} & set(a.parts):
        with icefloe.LocalCluster(num_nodes=2, memory_limit=None) as cluster, \
                cluster.client() as client:
            client.load("p", table.metadata_location)
            if "take" in a.parts:
                result["take"] = part_take(cluster, table.files, table.rows, a.rounds, a.out,
                                           log)
            if "epoch" in a.parts:
                result["epoch"] = part_epoch(cluster, a.rounds, a.epochs, a.out, log)
            if "variants" in a.parts:
                result["variants"] = part_variants(cluster, a.rounds, a.epochs, log)
    result["uptime_end"] = os.getloadavg()
    path = a.out / f"profile_limits-{'-'.join(a.parts)}.json"
    path.write_text(json.dumps(result, indent=1, default=float))
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
