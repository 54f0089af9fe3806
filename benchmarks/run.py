"""Runs the benchmark suite: every figure a ratio measured side by side in this run.

    .venv/bin/python benchmarks/run.py [--quick] [--only wire,epoch] [--out benchmarks/results]

Writes <out>/<name>.json and <name>.png per benchmark, and <out>/summary.json
and summary.md: each target of shared/design/performance.md with the measured
ratio and whether it holds.
"""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import common  # noqa: E402

BENCHMARKS = ["wire", "epoch", "random_access", "stall", "cold_load", "memory", "scale_out",
              "concurrency", "failover", "heal", "demo", "tokenization", "refresh", "disk_tier",
              "bounded_load", "tokenizer_speed", "pack_labels", "sft", "tier_reference"]


def _fmt(x: Any) -> str:
    if x is None:
        return "n/a"
    return f"{x:.3g}" if isinstance(x, float) else str(x)


def summarize(cfg: common.Config, results: dict[str, Any], errors: dict[str, str],
              wall_s: float, info: dict[str, Any]) -> str:
    targets = []
    for name, res in results.items():
        for t in res.get("targets", []):
            targets.append({"benchmark": name, **t})
    # The suite's time: what each benchmark took when it last ran (a run of a
    # subset merges with the earlier results of the others).
    bench_s = sum(float(res.get("seconds", 0)) for res in results.values())
    summary = {"machine": info, "quick": cfg.quick, "rows": cfg.rows,
               "arrow_bytes": cfg.rows * common.ROW_BYTES, "wall_seconds": wall_s,
               "benchmark_seconds": {n: res.get("seconds") for n, res in results.items()},
               "suite_seconds": bench_s,
               "targets": targets, "errors": errors,
               "notes": {name: res.get("notes", []) for name, res in results.items()}}
    (cfg.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    lines = [
        f"# icefloe benchmarks ({'quick' if cfg.quick else 'full'} run, {info['date']})",
        "",
        f"Machine: {info['cpus']} cores ({info['cpu']}), {info['memory_gib']} GiB RAM, "
        f"{info['os']}, kernel {info['kernel']} (shared memory's huge pages: "
        f"{info['shmem_huge_pages']}), loopback networking; shared with other "
        f"jobs (load average {info['loadavg_at_start'][0]:.2f} at start). Table: "
        f"{cfg.rows:,} rows, {cfg.rows * common.ROW_BYTES / 1e9:.2f} GB in Arrow. The "
        f"benchmarks took {bench_s / 60:.1f} min ("
        + ", ".join(f"{n} {float(r.get('seconds', 0)):.0f} s" for n, r in results.items())
        + ").",
        "",
        "| benchmark | figure | target | measured | pass |",
        "|---|---|---|---|---|",
    ]
    for t in targets:
        ok = {True: "yes", False: "**no**", None: "-"}[t["pass"]]
        lines.append(f"| {t['benchmark']} | {t['figure']} | {t['target']} | "
                     f"{_fmt(t['measured'])} | {ok} |")
    for name, err in errors.items():
        lines.append(f"| {name} | failed or skipped: {err[:160]} | | | n/a |")
    notes = [(n, x) for n, xs in summary["notes"].items() for x in xs]
    if notes:
        lines += ["", "Notes:", ""] + [f"- {n}: {x}" for n, x in notes]
    text = "\n".join(lines) + "\n"
    (cfg.out / "summary.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small data, ~3 minutes")
    parser.add_argument("--only", default="", help=f"comma-separated subset of {BENCHMARKS}")
    parser.add_argument("--out", type=Path, default=common.ROOT / "benchmarks" / "results")
    parser.add_argument("--rows", type=int, help="rows in the test table")
    parser.add_argument("--files", type=int, help="data files in the test table")
    parser.add_argument("--work", type=Path, help="where the test table lives (reused)")
    parser.add_argument("--fresh-data", action="store_true", help="regenerate the table")
    parser.add_argument("--repeats", type=int,
                        help="rounds per measurement (default 3, 2 with --quick)")
    args = parser.parse_args(argv)
    chosen = [b.strip() for b in args.only.split(",") if b.strip()] or BENCHMARKS
    unknown = set(chosen) - set(BENCHMARKS)
    if unknown:
        parser.error(f"unknown benchmarks {sorted(unknown)}; choose from {BENCHMARKS}")
    cfg = common.Config.make(args.quick, args.out, args.rows, args.files, args.work,
                             args.fresh_data)
    if args.repeats:
        cfg.repeats = args.repeats
    cfg.out.mkdir(parents=True, exist_ok=True)
    info = common.machine()
    print(f"icefloe benchmarks: {', '.join(chosen)} ({'quick' if cfg.quick else 'full'}); "
          f"{info['cpus']} cores, load {info['loadavg_at_start'][0]:.2f}", flush=True)

    def log(msg: str) -> None:
        print(msg, flush=True)

    # SIGTERM unwinds like Ctrl-C, so clusters, namespaces and servers are torn down.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    env = common.Env(cfg, log)
    results: dict[str, Any] = {}
    errors: dict[str, str] = {}
    t0 = time.perf_counter()
    try:
        for name in chosen:
            log(f"\n=== {name} ===")
            t = time.perf_counter()
            try:
                module = importlib.import_module(f"benchmarks.{name}")
                results[name] = module.run(env)
                results[name]["seconds"] = time.perf_counter() - t
                common.write_result(cfg, name, results[name])
                log(f"=== {name}: {time.perf_counter() - t:.0f} s")
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # noqa: BLE001 - one failure must not stop the rest
                log(f"=== {name} FAILED:\n{traceback.format_exc()}")
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                errors[name] = f"{type(exc).__name__}: {first}"
    finally:
        env.close()
    wall = time.perf_counter() - t0
    if len(chosen) == len(BENCHMARKS) or not (cfg.out / "summary.json").exists():
        text = summarize(cfg, results, errors, wall, info)
    else:  # a subset: merge into the last summary's other benchmarks
        text = _merge_summary(cfg, results, errors, wall, info)
    print("\n" + text)
    return 1 if errors else 0


def _merge_summary(cfg: common.Config, results: dict[str, Any], errors: dict[str, str],
                   wall: float, info: dict[str, Any]) -> str:
    merged: dict[str, Any] = {}
    for name in BENCHMARKS:
        path = cfg.out / f"{name}.json"
        if name in results:
            merged[name] = results[name]
        elif path.exists() and name not in errors:
            merged[name] = json.loads(path.read_text())
    return summarize(cfg, merged, errors, wall, info)


if __name__ == "__main__":
    sys.exit(main())
