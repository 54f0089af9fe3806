"""What every benchmark shares: the configuration, the test table, the S3 server,
measured subprocesses, machine limits (iperf3, memcpy), tables, JSON and plots.

The orchestrator (run.py) talks to clusters over Flight, so it never forks a
child that uses Flight (gRPC hangs after fork): every measured client runs in a
fresh interpreter (``run_worker``), which also keeps measurements from sharing a
GIL or a heap with the orchestrator.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
FEATURES = 16  # float32 feature columns f0..f15, plus id (int64) and label (int32)


@dataclass
class Config:
    """Sizes and places for one run of the suite."""

    quick: bool
    out: Path
    rows: int
    files: int
    batch_size: int = 8192         # rows per training batch
    cache_batch_rows: int = 65536  # rows per cached record batch (the icefloe default)
    repeats: int = 3
    work: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))
    fresh_data: bool = False

    @classmethod
    def make(cls, quick: bool, out: Path, rows: int | None = None, files: int | None = None,
             work: Path | None = None, fresh_data: bool = False) -> Config:
        rows = rows or (1_500_000 if quick else 12_000_000)
        files = files or (4 if quick else 8)
        work = work or Path(tempfile.gettempdir()) / f"icefloe-bench-{rows}-{files}"
        return cls(quick=quick, out=out, rows=rows, files=files, work=work,
                   fresh_data=fresh_data, repeats=2 if quick else 3)


# -- the table ---------------------------------------------------------------


def make_rows(start: int, n: int, seed: int) -> pa.Table:
    """n rows of a tabular training set: id, label and FEATURES float32 features."""
    rng = np.random.default_rng(seed)
    cols: dict[str, Any] = {
        "id": np.arange(start, start + n, dtype=np.int64),
        "label": rng.integers(0, 10, n, dtype=np.int32),
    }
    feats = rng.standard_normal((FEATURES, n), dtype=np.float32)
    for i in range(FEATURES):
        cols[f"f{i}"] = feats[i]
    return pa.table(cols)


COLUMNS = ["id", "label", *[f"f{i}" for i in range(FEATURES)]]
ROW_BYTES = 8 + 4 + 4 * FEATURES


@dataclass
class TableInfo:
    metadata_location: str
    files: list[str]       # local paths of the table's Parquet data files
    rows: int
    arrow_bytes: int       # rows * ROW_BYTES: the Arrow size of the whole table
    parquet_bytes: int


def _local_path(uri: str) -> str:
    return uri[len("file://"):] if uri.startswith("file://") else uri


def build_table(cfg: Config, log: Callable[[str], None] = print) -> TableInfo:
    """An Iceberg table (pyiceberg, SQL catalog on sqlite, local warehouse) of
    cfg.rows rows in cfg.files data files; reused from cfg.work when it exists."""
    marker = cfg.work / "table.json"
    if marker.exists() and not cfg.fresh_data:
        info = TableInfo(**json.loads(marker.read_text()))
        if all(Path(f).exists() for f in info.files) and Path(
                _local_path(info.metadata_location)).exists():
            log(f"table: reusing {info.rows:,} rows in {len(info.files)} files under {cfg.work}")
            return info
    from pyiceberg.catalog.sql import SqlCatalog

    shutil.rmtree(cfg.work, ignore_errors=True)
    cfg.work.mkdir(parents=True)
    t0 = time.perf_counter()
    catalog = SqlCatalog("bench", uri=f"sqlite:///{cfg.work / 'catalog.db'}",
                         warehouse=(cfg.work / "warehouse").as_uri())
    catalog.create_namespace_if_not_exists("db")
    per_file = -(-cfg.rows // cfg.files)
    table = None
    for k in range(cfg.files):
        start = k * per_file
        n = min(per_file, cfg.rows - start)
        if n <= 0:
            break
        chunk = make_rows(start, n, seed=k)
        if table is None:
            table = catalog.create_table("db.bench", schema=chunk.schema)
        table.append(chunk)
        log(f"table: wrote file {k + 1}/{cfg.files} ({start + n:,} rows)")
    assert table is not None
    files = sorted(_local_path(t.file.file_path) for t in table.scan().plan_files())
    info = TableInfo(metadata_location=table.metadata_location, files=files, rows=cfg.rows,
                     arrow_bytes=cfg.rows * ROW_BYTES,
                     parquet_bytes=sum(Path(f).stat().st_size for f in files))
    marker.write_text(json.dumps(info.__dict__))
    log(f"table: {cfg.rows:,} rows, {info.arrow_bytes / 1e9:.2f} GB Arrow, "
        f"{info.parquet_bytes / 1e9:.2f} GB Parquet in {len(files)} files "
        f"({time.perf_counter() - t0:.0f} s)")
    return info


# -- S3 (moto) -----------------------------------------------------------------


@dataclass
class S3:
    endpoint: str           # http://127.0.0.1:PORT
    env: dict[str, str]
    keys: list[str]         # warehouse/<key> of each uploaded data file
    server: Any = None

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def start_moto() -> S3:
    """A moto S3 server on loopback (as tests/conftest.py) with an empty
    bucket 'warehouse'."""
    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": endpoint, "AWS_EC2_METADATA_DISABLED": "true"}
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                 aws_access_key_id="testing", aws_secret_access_key="testing").create_bucket(
        Bucket="warehouse")
    return S3(endpoint=endpoint, env=env, keys=[], server=server)


def start_s3(table: TableInfo, log: Callable[[str], None] = print) -> S3:
    """start_moto() holding the table's data files, byte for byte."""
    import boto3

    s3 = start_moto()
    client = boto3.client("s3", endpoint_url=s3.endpoint, region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    t0 = time.perf_counter()
    for f in table.files:
        key = "bench/" + Path(f).name
        client.upload_file(f, "warehouse", key)
        s3.keys.append(f"warehouse/{key}")
    log(f"s3: moto at {s3.endpoint}, uploaded {len(s3.keys)} files "
        f"({time.perf_counter() - t0:.1f} s)")
    return s3


# -- measured subprocesses -------------------------------------------------------


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    import icefloe

    env = {**os.environ, **(extra or {})}
    # Children import the same icefloe (and benchmarks) as this process.
    paths = [str(ROOT), str(Path(icefloe.__file__).resolve().parent.parent)]
    paths += [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def worker_argv(name: str, args: dict[str, Any]) -> list[str]:
    return [sys.executable, "-m", "benchmarks.workers", name, json.dumps(args)]


def run_worker(name: str, args: dict[str, Any], *, timeout_s: float = 900,
               prefix: Sequence[str] = (), env: dict[str, str] | None = None) -> Any:
    """Runs benchmarks.workers.<name>(**args) in a fresh interpreter; its JSON answer."""
    out = subprocess.run([*prefix, *worker_argv(name, args)], cwd=ROOT, env=child_env(env),
                         capture_output=True, text=True, timeout=timeout_s)
    if out.returncode != 0:
        raise RuntimeError(f"worker {name} failed ({out.returncode}):\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def start_worker(name: str, args: dict[str, Any], *, prefix: Sequence[str] = (),
                 env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([*prefix, *worker_argv(name, args)], cwd=ROOT, env=child_env(env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_worker(proc: subprocess.Popen, name: str, timeout_s: float = 900) -> Any:
    stdout, stderr = proc.communicate(timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {name} failed ({proc.returncode}):\n{stderr[-4000:]}")
    return json.loads(stdout.strip().splitlines()[-1])


# -- measuring ---------------------------------------------------------------------


def median(xs: Iterable[float]) -> float:
    return float(statistics.median(list(xs)))


def spread(xs: Sequence[float]) -> tuple[float, float, float]:
    """(median, min, max)."""
    return median(xs), float(min(xs)), float(max(xs))


def interleaved(variants: Sequence[str], repeats: int,
                measure: Callable[[str, int], float | dict[str, Any]],
                log: Callable[[str], None] = print) -> dict[str, list[Any]]:
    """Measures every variant `repeats` times, round-robin, so drifting machine
    load touches every variant alike."""
    out: dict[str, list[Any]] = {v: [] for v in variants}
    for r in range(repeats):
        for v in variants:
            value = measure(v, r)
            out[v].append(value)
            shown = value
            if isinstance(value, dict):
                shown = value.get("gbps", next((x for x in value.values()
                                                if isinstance(x, float)), ""))
            log(f"  {v} [{r + 1}/{repeats}]: {_fmt(shown)}")
    return out


def paired_ratio(got: dict[str, list[dict[str, Any]]], a: str, b: str,
                 key: str = "gbps") -> float:
    """Median over rounds of a / b, both measured in the same round of
    `interleaved`: the machine is shared, and a slow phase slows both of a pair."""
    return median(x[key] / y[key] for x, y in zip(got[a], got[b], strict=True))


def _fmt(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def iperf3(seconds: float = 3.0, parallel: int = 1) -> dict[str, float]:
    """Loopback TCP from iperf3 (server and client on 127.0.0.1): GB/s and the CPU
    seconds both ends spent per GB."""
    port = free_port()
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port), "-B", "127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not _listening(port) and time.monotonic() < deadline:
            time.sleep(0.02)  # (a probe connection would use up the one-off server)
        out = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-J",
                              "-t", str(seconds), "-P", str(parallel)],
                             capture_output=True, text=True, timeout=seconds + 30)
        data = json.loads(out.stdout)
        if "error" in data:
            raise RuntimeError(f"iperf3: {data['error']}")
        gbps = data["end"]["sum_received"]["bits_per_second"] / 8 / 1e9
        cpu = data["end"]["cpu_utilization_percent"]
        cores = (cpu["host_total"] + cpu["remote_total"]) / 100
        return {"gbps": gbps, "cpu_s_per_gb": cores / gbps}
    finally:
        server.kill()
        server.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _listening(port: int) -> bool:
    """Whether something listens on TCP port `port` (from /proc/net/tcp)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        parts = line.split()
        if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
            return True
    return False


def memcpy_gbps(nbytes: int = 1 << 30, repeats: int = 3) -> float:
    """One core copying nbytes (numpy, i.e. memcpy): GB/s, best of `repeats`."""
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.empty_like(src)
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = max(best, nbytes / (time.perf_counter() - t0) / 1e9)
    return best


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def held_bytes(pid: int) -> int:
    """Memory a process holds: its resident pages (VmRSS) other than shared
    memory, plus every page of the memory files it holds open (a node's
    shared copies, --share-memory: resident whether mapped or not)."""
    status = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssShmem"):
            status[key] = int(value.split()[0]) * 1024
    files = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd).startswith("/memfd:"):
                files += os.stat(fd).st_blocks * 512
        except OSError:
            continue  # closed meanwhile
    return status.get("VmRSS", 0) - status.get("RssShmem", 0) + files


def _shmem_huge_pages() -> str:
    """The kernel's transparent-huge-page policy for shared memory, which
    decides the page size of the nodes' shared files (docs/protocol.md, "Huge pages")."""
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/shmem_enabled").read_text()
    except OSError as exc:
        return f"unknown ({exc.strerror})"
    chosen = text[text.find("[") + 1:text.find("]")] if "[" in text else ""
    return chosen or text.strip()


def machine() -> dict[str, Any]:
    mem = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem = int(line.split()[1]) * 1024
    try:
        os_name = dict(line.split("=", 1) for line in Path("/etc/os-release").read_text()
                       .splitlines() if "=" in line).get("PRETTY_NAME", "").strip('"')
    except OSError:
        os_name = platform.platform()
    cpu = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    return {"cpus": os.cpu_count(), "cpu": cpu, "memory_gib": round(mem / 2**30, 1),
            "os": os_name, "kernel": platform.release(), "python": platform.python_version(),
            "pyarrow": pa.__version__, "loadavg_at_start": os.getloadavg(),
            "shmem_huge_pages": _shmem_huge_pages(),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


# -- reporting --------------------------------------------------------------------


def target(figure: str, op: str, threshold: float, measured: float | None,
           note: str = "") -> dict[str, Any]:
    """One performance.md target and how this run did against it (op "report":
    a figure to report, no threshold)."""
    if op == "report":
        return {"figure": figure, "target": "report", "measured": measured, "pass": None,
                "note": note}
    if measured is None:
        ok = None
    elif op == ">=":
        ok = measured >= threshold
    elif op == ">":
        ok = measured > threshold
    else:
        ok = measured < threshold if op == "<" else measured <= threshold
    return {"figure": figure, "target": f"{op} {threshold:g}", "measured": measured,
            "pass": ok, "note": note}


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[_cell(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    for r in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
    text = "\n".join(lines)
    print("\n" + text + "\n", flush=True)
    return text


def _cell(c: Any) -> str:
    if isinstance(c, float):
        if c == 0 or abs(c) >= 100:
            return f"{c:,.0f}"
        return f"{c:.3g}" if abs(c) < 1 else f"{c:.2f}"
    return str(c)


def write_result(cfg: Config, name: str, result: dict[str, Any]) -> Path:
    cfg.out.mkdir(parents=True, exist_ok=True)
    path = cfg.out / f"{name}.json"
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    return path


def bar_plot(cfg: Config, name: str, title: str, labels: Sequence[str],
             values: Sequence[float], *, lows: Sequence[float] | None = None,
             highs: Sequence[float] | None = None, ylabel: str = "GB/s",
             lines: Sequence[tuple[float, str]] = (), colors: Sequence[str] | None = None,
             log_scale: bool = False) -> Path:
    """A bar per variant (median), whiskers from min to max, horizontal reference lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(labels) + 2), 4.2))
    x = np.arange(len(labels))
    yerr = None
    if lows is not None and highs is not None:
        yerr = np.array([[v - lo for v, lo in zip(values, lows, strict=True)],
                         [hi - v for v, hi in zip(values, highs, strict=True)]])
    ax.bar(x, values, yerr=yerr, capsize=4, color=colors or "#4477aa")
    for xi, v in zip(x, values, strict=True):
        ax.annotate(f"{v:.3g}", (xi, v), ha="center", va="bottom", fontsize=8,
                    xytext=(0, 2), textcoords="offset points")
    for y, label in lines:
        ax.axhline(y, linestyle="--", color="#aa3377", linewidth=1)
        ax.annotate(label, (len(labels) - 0.5, y), ha="right", va="bottom", fontsize=8,
                    color="#aa3377")
    ax.set_xticks(x, labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    if log_scale:
        ax.set_yscale("log")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    cfg.out.mkdir(parents=True, exist_ok=True)
    path = cfg.out / f"{name}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# -- what a run shares ------------------------------------------------------------


def find_cpp_bench() -> str | None:
    """The C++ client (benchmarks/cpp, CMake target flight_read_bench)."""
    candidates = []
    if os.environ.get("ICEFLOE_BENCH_CPP"):
        candidates.append(Path(os.environ["ICEFLOE_BENCH_CPP"]))
    if os.environ.get("ICEFLOE_BIN_DIR"):  # <build>/cpp/apps -> <build>/benchmarks/cpp
        candidates.append(Path(os.environ["ICEFLOE_BIN_DIR"]).parent.parent / "benchmarks" /
                          "cpp" / "flight_read_bench")
    candidates += sorted((ROOT / "build").glob("*/benchmarks/cpp/flight_read_bench"))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    return None


class Env:
    """The table, the S3 server and the logs of one run, made when first needed."""

    def __init__(self, cfg: Config, log: Callable[[str], None] = print) -> None:
        self.cfg = cfg
        self.log = log
        self._table: TableInfo | None = None
        self._s3: S3 | None = None
        self.logs = Path(tempfile.mkdtemp(prefix="icefloe-bench-logs-"))

    @property
    def table(self) -> TableInfo:
        if self._table is None:
            self._table = build_table(self.cfg, self.log)
        return self._table

    @property
    def s3(self) -> S3:
        if self._s3 is None:
            self._s3 = start_s3(self.table, self.log)
        return self._s3

    def log_dir(self, name: str) -> Path:
        path = self.logs / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def close(self) -> None:
        if self._s3 is not None:
            self._s3.stop()
        shutil.rmtree(self.logs, ignore_errors=True)


def start_pyflight(files: list[str], batch_rows: int, log_path: Path,
                   location: str = "grpc://127.0.0.1:0") -> Any:
    """The Python pyarrow.flight baseline server (benchmarks/pyflight_server.py)."""
    from icefloe._process import ServerProcess

    argv = [sys.executable, "-m", "benchmarks.pyflight_server", "--batch-rows", str(batch_rows),
            "--location", location, *files]
    return ServerProcess(name="pyflight", argv=argv, log_path=log_path,
                         env=child_env()).start(timeout_s=600)


class Timer:
    """with Timer() as t: ...; t.seconds"""

    def __enter__(self) -> Timer:
        self._t0 = time.perf_counter()
        self.seconds = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._t0
