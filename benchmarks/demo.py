"""The demo's numbers: runs the numeric quick-start demo (``python -m icefloe_demo
--numeric``; ``./dev.sh demo`` runs the review demo by default) as a user would,
and records what it prints: per source (Parquet from S3, Parquet on local
disk, icefloe) the steady-state MB/s, rows/s and share of step time spent
waiting, and icefloe's speed-up over each.

The demo is the judge of its own measurement (its training loop, its table in
the loopback S3 server); this benchmark only runs it (with its defaults in a full
run, a smaller table in a quick one) and parses its summary. When the summary's
format changes, parsing fails with the line it expected, and the raw output is
kept in the result.
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

from . import common
from .common import Env

NAME = "demo"
# "<kind> steady <rows> <seconds> <MB/s> <rows/s> <waiting>% <loss>" (icefloe_demo.numeric._row)
STEADY = re.compile(r"^(\S+)\s+steady\s+([\d,]+)\s+([\d.]+)\s+([\d,.]+)\s+([\d,]+)\s+"
                    r"([\d.]+)%")
SPEEDUP = re.compile(r"^icefloe: ([\d.]+)x the MB/s of (.+)$")


def parse(text: str) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """(steady figures per source, icefloe's speed-up per baseline label)."""
    steady: dict[str, dict[str, float]] = {}
    speedup: dict[str, float] = {}
    for line in text.splitlines():
        if m := STEADY.match(line.strip()):
            steady[m[1]] = {"rows": int(m[2].replace(",", "")), "seconds": float(m[3]),
                            "mb_per_s": float(m[4].replace(",", "")),
                            "rows_per_s": float(m[5].replace(",", "")),
                            "waiting_share": float(m[6]) / 100}
        elif m := SPEEDUP.match(line.strip()):
            speedup[m[2].strip()] = float(m[1])
    if not steady or not speedup:
        raise ValueError("the demo's summary has no 'steady' rows or no 'icefloe: N.NNx the "
                         "MB/s of ...' lines; output ends:\n" + text[-1500:])
    return steady, speedup


def run(env: Env) -> dict[str, Any]:
    cfg, log = env.cfg, env.log
    # The numeric demo (its figures are the MB/s ones parsed here); the main
    # job, the review demo, is judged by the tokenize benchmark's figures.
    args = ["--numeric", *(["--size-mb", "100", "--epochs", "2"] if cfg.quick else [])]
    argv = [sys.executable, "-m", "icefloe_demo", *args]
    log(f"demo: {' '.join(argv[1:])}")
    with common.Timer() as t:
        out = subprocess.run(argv, cwd=common.ROOT, env=common.child_env(), capture_output=True,
                             text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"the demo failed ({out.returncode}):\n{out.stderr[-3000:]}")
    steady, speedup = parse(out.stdout)
    s3 = next((v for k, v in speedup.items() if "S3" in k), None)
    local = next((v for k, v in speedup.items() if "local" in k), None)
    rows = [[k, v["mb_per_s"], v["rows_per_s"], v["waiting_share"]] for k, v in steady.items()]
    how = " ".join(args) or "(defaults)"
    text = common.print_table(f"the demo (python -m icefloe_demo {how}), steady state, "
                              f"{t.seconds:.0f} s",
                              ["source", "MB/s", "rows/s", "waiting share"], rows)
    targets = [
        common.target("demo: icefloe / Parquet from S3 (MB/s, steady epochs)", ">=", 2, s3),
        common.target("demo: icefloe / Parquet on local disk (MB/s, steady epochs)", ">", 1,
                      local),
    ]
    notes = ["demo, steady state: " + "; ".join(
        f"{k} {v['mb_per_s']:.0f} MB/s, waiting {v['waiting_share']:.0%}"
        for k, v in steady.items())]
    result = {"name": NAME, "argv": argv[1:], "steady": steady, "speedup": speedup,
              "targets": targets, "notes": notes, "table": text, "stdout": out.stdout}
    common.write_result(cfg, NAME, result)
    return result
