"""Disk tier: a table 4x the nodes' memory budget, read from tier files, beside
the same table all in memory, in one run (issue 29's benchmark, first part).

Two nodes over loopback TCP (a copy on the tier is not shared in memory, so
the in-memory cluster streams too). The table is written in data files of
about 2 MB so that a load's reads in flight fit the small memory budget.
Each tier epoch is read twice: cold, after the nodes' tier pages are dropped
(``process_madvise(MADV_PAGEOUT)`` on the nodes' mappings of their tier
files, then ``POSIX_FADV_DONTNEED`` on the files, after ``sync``: mapped
pages survive ``drop_caches`` and ``fadvise`` alone), and warm. The bytes the
nodes read from disk come from ``/proc/<pid>/io`` (``read_bytes``); the
disk's own sequential rate from ``dd`` with ``O_DIRECT`` on a file in the
same directory. The tier is read with the nodes' read-ahead (its default
working set, an eighth of the memory limit) and without it
(``--prefetch-limit 0``: a cold epoch is then the kernel's readahead on page
faults); the nodes' own count of tier bytes found in RAM and read from disk
(``icefloe_node_tier_read_bytes_total``) is reported for each. The read-ahead
tracks ``none`` streams; ``window`` ones are the kernel's either way.

Belady against LRU on the real nodes: two jobs (seeds 1 and 2) read
``EPOCHS`` ``block`` epochs each at once, on the tier cold, with the nodes'
working set under ``--prefetch-policy belady`` (reads ahead by the plans)
and ``lru`` (the baseline cache, no prefetch); the hit ratio is the nodes'
own count of reads that found their unit in the working set
(``icefloe_node_prefetch_reads_total``).
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from . import common
from .common import Env

NAME = "disk_tier"
NODES = 2
BATCH = 4096
MODES = ("none", "window")
EPOCHS = 3  # per job, in the policy comparison
_SYS_PROCESS_MADVISE = 440  # x86_64 and aarch64
_MADV_PAGEOUT = 21


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _drop_tier_pages(pids: list[int], tier: Path) -> None:
    """Pages the nodes' tier mappings out and drops the files' page cache.
    OSError when the system refuses (process_madvise needs CAP_SYS_NICE)."""
    os.sync()
    libc = ctypes.CDLL(None, use_errno=True)
    files = set()
    for pid in pids:
        pidfd = os.pidfd_open(pid)
        try:
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                parts = line.split(maxsplit=5)
                if len(parts) < 6 or not parts[5].startswith(str(tier)):
                    continue
                start, stop = (int(x, 16) for x in parts[0].split("-"))
                iov = _Iovec(start, stop - start)
                if libc.syscall(_SYS_PROCESS_MADVISE, pidfd, ctypes.byref(iov), 1,
                                _MADV_PAGEOUT, 0) < 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"process_madvise(MADV_PAGEOUT): {os.strerror(err)}")
                files.add(parts[5])
        finally:
            os.close(pidfd)
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _read_bytes(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("read_bytes:"):
                total += int(line.split()[1])
    return total


def _disk_gbps(directory: Path, mib: int) -> float | None:
    """Sequential O_DIRECT read rate of a fresh file in `directory` (dd)."""
    path = directory / "dd-probe"
    try:
        subprocess.run(["dd", "if=/dev/urandom", f"of={path}", "bs=1M", f"count={mib}",
                        "oflag=direct", "status=none"], check=True, timeout=300)
        out = subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=4M", "iflag=direct"],
                             check=True, timeout=300, capture_output=True, text=True).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        path.unlink(missing_ok=True)
    m = re.search(r"(\d+) bytes .* copied, ([\d.]+) s", out)
    return int(m.group(1)) / float(m.group(2)) / 1e9 if m else None


def _table(env: Env, arrow_bytes: int) -> Any:
    from iceberg_util import Warehouse  # tests/ helper, as the other benchmarks use

    rows = arrow_bytes // common.ROW_BYTES
    root = Path(tempfile.gettempdir()) / f"icefloe-bench-tier-{rows}"
    wh = Warehouse(root)
    if (root / "made").exists():
        return wh.table("t"), rows
    data = pa.concat_tables([common.make_rows(s, min(500_000, rows - s), seed=s)
                             for s in range(0, rows, 500_000)])
    table = wh.create("t", data, properties={"write.target-file-size-bytes": str(2 << 20)})
    (root / "made").touch()
    env.log(f"disk tier: wrote {rows:,} rows ({arrow_bytes / 1e6:.0f} MB Arrow) in 2 MB files")
    return table, rows


def _policy_run(env: Env, table: Any, tier: dict[str, str], policy: str, nodes_total: Any,
                scrape_nodes: Any) -> dict[str, float]:
    """Two jobs reading block epochs at once under one working-set policy."""
    import threading

    import icefloe

    args = [["--prefetch-policy", policy] for _ in range(NODES)]
    with icefloe.LocalCluster(num_nodes=NODES, share_memory=False, node_args=args,
                              log_dir=env.log_dir(NAME), **tier) as cluster, \
            cluster.client() as client:
        client.load("t", table.metadata_location, batch_rows=BATCH)
        _drop_tier_pages([n.popen.pid for n in cluster.nodes], cluster._tier_dir)
        before = scrape_nodes(cluster)
        nbytes = [0, 0]
        errors: list[BaseException] = []

        def job(k: int) -> None:
            try:
                with cluster.client() as c:
                    for epoch in range(EPOCHS):
                        for batch in c.iter_epoch("t", batch_size=BATCH, shuffle="block",
                                                  seed=k + 1, epoch=epoch):
                            nbytes[k] += batch.nbytes
            except BaseException as exc:  # reported below, on the caller's thread
                errors.append(exc)

        t0 = time.perf_counter()
        threads = [threading.Thread(target=job, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
        seconds = time.perf_counter() - t0
        if errors:
            raise errors[0]
        after = scrape_nodes(cluster)

    def moved(result: str) -> float:
        return (nodes_total(after, "icefloe_node_prefetch_reads_total", result=result)
                - nodes_total(before, "icefloe_node_prefetch_reads_total", result=result))

    hits, misses = moved("hit"), moved("miss")
    reads = hits + misses
    out = {"hit_ratio": hits / reads if reads else 0.0, "reads": reads,
           "gbps": sum(nbytes) / seconds / 1e9}
    env.log(f"  policy {policy}: hit ratio {out['hit_ratio']:.3f} of {reads:,.0f} reads, "
            f"{out['gbps']:.3f} GB/s")
    return out


def _epoch(client: Any, mode: str, seed: int) -> tuple[float, int]:
    n = 0
    t0 = time.perf_counter()
    for batch in client.iter_epoch("t", batch_size=BATCH, shuffle=mode, seed=seed):
        n += batch.nbytes
    return time.perf_counter() - t0, n


def run(env: Env) -> dict[str, Any]:
    import sys

    import icefloe

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    cfg, log = env.cfg, env.log
    arrow_bytes = (128 if cfg.quick else 512) << 20
    memory = arrow_bytes // 4 // NODES  # the table is 4x the cluster's memory
    table, rows = _table(env, arrow_bytes)
    got: dict[str, list[dict[str, float]]] = {}
    notes: dict[str, str] = {}
    disk_gbps = None
    from test_metrics import nodes_total, scrape_nodes  # tests/ helpers

    tier_args = {"memory_limit": str(memory), "disk_limit": str(2 * arrow_bytes)}
    no_prefetch = [["--prefetch-limit", "0"] for _ in range(NODES)]
    for variant, kwargs in (("in memory", {"memory_limit": str(4 * arrow_bytes)}),
                            ("disk tier", tier_args),
                            ("disk tier, no prefetch", {**tier_args, "node_args": no_prefetch}),
                            ("disk tier, mapped", {**tier_args, "share_memory": True})):
        kwargs = {"share_memory": False, **kwargs}
        with icefloe.LocalCluster(num_nodes=NODES, log_dir=env.log_dir(NAME),
                                  **kwargs) as cluster, \
                cluster.client() as client:

            def tier_read() -> tuple[float, float]:
                scrapes = scrape_nodes(cluster)
                return tuple(nodes_total(scrapes, "icefloe_node_tier_read_bytes_total",
                                         **{"from": f}) for f in ("ram", "disk"))

            client.load("t", table.metadata_location, batch_rows=BATCH)
            status = client.status()["nodes"]
            log(f"disk tier: {variant}: "
                f"{sum(n['memory_used_bytes'] for n in status) / 1e6:.0f} MB in memory, "
                f"{sum(n['disk_used_bytes'] for n in status) / 1e6:.0f} MB on disk")
            pids = [n.popen.pid for n in cluster.nodes]
            if kwargs["share_memory"]:  # this process maps the tier files and reads them
                pids.append(os.getpid())
            tier = cluster._tier_dir
            if tier is not None and disk_gbps is None:
                disk_gbps = _disk_gbps(tier, 256)
            for mode in MODES:
                for r in range(cfg.repeats):
                    for warmth in (("cold", "warm") if tier is not None else ("",)):
                        key = f"{variant} {mode}" + (f", {warmth}" if warmth else "")
                        if warmth == "cold":
                            try:
                                _drop_tier_pages(pids, tier)
                            except OSError as exc:
                                notes[key] = f"not measured: {exc}"
                                continue
                        before, counted = _read_bytes(pids), tier_read()
                        seconds, nbytes = _epoch(client, mode, seed=r)
                        disk = _read_bytes(pids) - before
                        ram_mb, disk_wait_mb = ((b - a) / 1e6 for a, b in
                                                zip(counted, tier_read(), strict=True))
                        got.setdefault(key, []).append(
                            {"gbps": nbytes / seconds / 1e9, "disk_mb": disk / 1e6,
                             "seconds": seconds, "tier_ram_mb": ram_mb,
                             "tier_disk_mb": disk_wait_mb})
                        log(f"  {key}: {nbytes / seconds / 1e9:.3f} GB/s, "
                            f"{disk / 1e6:.0f} MB read from disk; streams found "
                            f"{ram_mb:.0f} MB in RAM, waited for {disk_wait_mb:.0f} MB")
    policies = {policy: _policy_run(env, table, tier_args, policy, nodes_total, scrape_nodes)
                for policy in ("belady", "lru")}
    med = {k: common.median(x["gbps"] for x in v) for k, v in got.items()}
    disk_mb = {k: common.median(x["disk_mb"] for x in v) for k, v in got.items()}
    waited_mb = {k: common.median(x["tier_disk_mb"] for x in v) for k, v in got.items()}

    def ratio(a: str, b: str) -> float | None:
        return med[a] / med[b] if a in med and b in med else None

    def disk_fraction(key: str) -> float | None:
        if key not in got or not disk_gbps:
            return None
        rate = common.median(x["disk_mb"] / 1e3 / x["seconds"] for x in got[key])
        return rate / disk_gbps

    text = common.print_table(
        f"disk tier: {rows:,} rows ({arrow_bytes / 1e6:.0f} MB Arrow) on {NODES} nodes of "
        f"{memory / 1e6:.0f} MB memory each (4x), batch {BATCH}, loopback TCP; "
        f"disk O_DIRECT read {disk_gbps or 0:.2f} GB/s",
        ["variant", "GB/s (median)", "MB read from disk", "MB streams waited for"],
        [[k, med[k], disk_mb[k], waited_mb[k]] for k in got])
    targets = []
    for mode in MODES:
        cold = f"disk tier {mode}, cold"
        note = notes.get(cold) or (f"page cache dropped per epoch; the nodes read "
                                   f"{disk_mb.get(cold, 0):.0f} MB from disk at "
                                   f"{100 * (disk_fraction(cold) or 0):.0f}% of its rate")
        targets.append(common.target(f"{cold} / in memory", ">=", 0.8,
                                     ratio(cold, f"in memory {mode}"), note))
        targets.append(common.target(f"disk tier {mode}, warm / in memory", "report", 0,
                                     ratio(f"disk tier {mode}, warm", f"in memory {mode}")))
        targets.append(common.target(f"disk tier {mode}, cold, prefetch / no prefetch", "report",
                                     0, ratio(cold, f"disk tier, no prefetch {mode}, cold")))
        # A same-host reader maps the tier files (share memory) instead of
        # having the units sent over loopback TCP (window epochs too, since
        # the reader cuts a span's pieces at segments; tier_reference.py).
        for warmth in ("cold", "warm"):
            targets.append(common.target(
                f"disk tier {mode}, {warmth}: mapped / over TCP", "report", 0,
                ratio(f"disk tier, mapped {mode}, {warmth}", f"disk tier {mode}, {warmth}")))
    # A window epoch's first part reads a block of every stratum, so it needs
    # nearly every page of the tier before the stream can run at memory speed:
    # the ratio if the whole tier were read at the disk's full rate first and
    # the epoch then ran as in memory.
    cold = "disk tier window, cold"
    if cold in got and "in memory window" in got and disk_gbps:
        t_mem = common.median(x["seconds"] for x in got["in memory window"])
        t_disk = disk_mb[cold] / 1e3 / disk_gbps
        targets.append(common.target(
            "disk tier window, cold / in memory, if the tier were read whole first", "report", 0,
            t_mem / (t_mem + t_disk),
            f"{disk_mb[cold]:.0f} MB at {disk_gbps:.2f} GB/s, then {t_mem:.2f} s as in memory"))
    for policy, p in policies.items():
        targets.append(common.target(f"two jobs, {EPOCHS} block epochs each: working-set hit "
                                     f"ratio, {policy}", "report", 0, p["hit_ratio"],
                                     f"{p['gbps']:.3f} GB/s in all"))
    text += "\n" + "\n".join(f"policy {k}: hit ratio {v['hit_ratio']:.3f} of {v['reads']:,.0f} "
                               f"reads, {v['gbps']:.3f} GB/s" for k, v in policies.items())
    result = {"name": NAME, "policies": policies, "rows": rows, "arrow_bytes": arrow_bytes,
              "memory_per_node": memory,
              "runs": got, "median_gbps": med, "disk_mb": disk_mb, "waited_mb": waited_mb,
              "disk_gbps": disk_gbps,
              "notes": notes, "targets": targets, "table": text}
    common.write_result(cfg, NAME, result)
    return result
