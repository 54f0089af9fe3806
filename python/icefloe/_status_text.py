"""``icefloe status`` in a terminal: the status page's tables as text.

Rendered from the head's ``status`` action (the same JSON the page on the
head's HTTP port is drawn from): datasets, nodes, jobs reading now, loads,
replaced copies kept for their readers and, with ``--follow``, the datasets
the head keeps on their table's newest snapshot.
"""

from __future__ import annotations

from typing import Any


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover - the loop returns


def _bar(share: float, width: int = 10) -> str:
    filled = round(min(max(share, 0.0), 1.0) * width)  # display only; the value is printed too
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _table(title: str, header: list[str], rows: list[list[str]], empty: str) -> str:
    if not rows:
        return f"{title}\n  {empty}\n"
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = [title, "  " + "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines) + "\n"


def _ago(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds:.1f}s ago"


def _following(follow: dict[str, Any]) -> str:
    """The FOLLOWING table: per dataset the last check and refresh, the lag and
    the snapshot followed, or why it is not followed."""
    period = follow.get("period_s") or 0
    title = f"FOLLOWING (every {period:g}s)"
    rows = []
    for f in follow.get("datasets", []):
        if not f.get("followed", True):
            rows.append([f.get("name", ""), "not followed", "", "", "", "",
                         f.get("why_not", "")])
            continue
        lag = f.get("lag_s")
        snapshot = f.get("snapshot_id")
        table = f.get("table_snapshot_id")
        error = f.get("last_error", "")
        if error:
            error = f"{f.get('errors', 0)} errors, last {_ago(f.get('last_error_s_ago'))}: {error}"
        rows.append([f.get("name", ""), f.get("state", ""),
                     "none" if snapshot is None else str(snapshot),
                     "" if table is None else str(table), _ago(f.get("last_check_s_ago")),
                     (f"{_ago(f.get('last_refresh_s_ago'))}, lag {lag:.1f}s"
                      if lag is not None else _ago(f.get("last_refresh_s_ago"))),
                     error])
    return _table(title, ["dataset", "state", "snapshot", "table's", "last check",
                          "last refresh", "errors"], rows, "no dataset loaded")


def _job_sources(job: dict[str, Any]) -> str:
    """Each dataset the job reads with its rows so far and rows per second
    (a mixture reads several); a head without ``sources`` names them only."""
    sources = job.get("sources") or []
    if not sources:
        return ", ".join(job.get("datasets", []))
    return ", ".join(f"{s.get('dataset', '')}: {s.get('rows_total', 0):,} rows, "
                     f"{s.get('rows_per_s', 0):,.0f} rows/s" for s in sources)


def render(status: dict[str, Any]) -> str:
    """The tables for one ``Client.status()``."""
    ready = "ready" if status.get("ready") else f"NOT READY: {status.get('reason', '')}"
    out = [f"head: {ready}\n"]
    datasets = [[d.get("name", ""), d.get("state", ""), f"{d.get('rows', 0):,}",
                 _bytes(d.get("bytes", 0)),
                 ", ".join(f"{n['node']} x{n['slices']}" for n in d.get("slices_per_node", []))]
                for d in status.get("datasets", [])]
    out.append(_table("DATASETS", ["name", "state", "rows", "bytes", "slices per node"],
                      datasets, "none"))
    nodes = []
    for n in status.get("nodes", []):
        used, limit = n.get("memory_used_bytes", 0), n.get("memory_limit_bytes", 0)
        memory = (f"{_bar(used / limit)} {_bytes(used)} of {_bytes(limit)}, "
                  f"{_bytes(max(0, limit - used))} free" if limit > 0
                  else f"{_bytes(used)} (no limit)")
        disk_used, disk_limit = n.get("disk_used_bytes", 0), n.get("disk_limit_bytes", 0)
        disk = (f"{_bar(disk_used / disk_limit)} {_bytes(disk_used)} of {_bytes(disk_limit)}"
                if disk_limit > 0 else "no tier")
        ram_read, disk_read = n.get("tier_ram_bytes", 0), n.get("tier_disk_bytes", 0)
        if ram_read + disk_read > 0:
            disk += (f"; read {100 * ram_read / (ram_read + disk_read):.1f}% from RAM, "
                     f"{_bytes(disk_read)} waited for; "
                     f"{n.get('prefetch_lead_batches', 0):,} batches ahead")
        seen = n.get("last_seen_s", -1)
        nodes.append([n.get("location", ""), n.get("state", ""),
                      "never" if seen < 0 else f"{seen:.1f}s ago", memory, disk])
    out.append(_table("NODES", ["node", "state", "heartbeat", "memory", "disk tier"], nodes,
                      "none"))
    jobs = [[j.get("job", ""), _job_sources(j), str(j.get("consumers", 0)),
             f"{j.get('rows_per_s', 0):,.0f}",
             f"{_bar(j.get('stall_ratio', 0))} {100 * j.get('stall_ratio', 0):.1f}%",
             f"rank {j.get('worst_rank', 0)}: {100 * j.get('worst_rank_stall_ratio', 0):.1f}%",
             ", ".join(j.get("nodes", []))]
            for j in status.get("jobs", [])]
    out.append(_table("JOBS", ["job", "datasets", "consumers", "rows/s", "waiting on data",
                               "worst rank", "nodes"], jobs,
                      "no job has reported in the last two minutes"))
    loads = [[load.get("name", ""), f"loading ({load.get('phase', '')})",
              f"{load.get('tasks_done', 0)}/{load.get('tasks_total', 0)} files",
              f"{load.get('seconds', 0):.1f}s"] for load in status.get("loads", [])]
    loads += [[load.get("name", ""), load.get("state", ""),
               load.get("error") or f"{load.get('rows', 0):,.0f} rows, "
                                    f"{_bytes(load.get('bytes', 0))}",
               f"{load.get('load_seconds', 0):.2f}s"] for load in status.get("recent_loads", [])]
    out.append(_table("LOADS", ["dataset", "state", "progress", "time"], loads, "none"))
    retired = [[r.get("name", ""), str(r.get("generation", "")), str(r.get("replaced_by", "")),
                _bytes(r.get("bytes", 0)), f"{r.get('age_s', 0):.1f}s",
                f"{r.get('idle_s', 0):.1f}s"] for r in status.get("retired", [])]
    if retired:  # replaced copies kept while epochs still read them
        out.append(_table("RETIRED (kept for the epochs reading them)",
                          ["dataset", "generation", "replaced by", "bytes", "age", "unread for"],
                          retired, "none"))
    follow = status.get("follow") or {}
    if follow.get("period_s"):
        out.append(_following(follow))
    return "\n".join(out)
