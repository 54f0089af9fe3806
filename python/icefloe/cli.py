"""The ``icefloe`` command line: run a local cluster and manage datasets.

    icefloe up [--nodes 3] [--memory-limit 4GiB] [--cluster-secret-file F]
                                                    run a local cluster until Ctrl-C
    icefloe load NAME SOURCE [--columns a,b] [--filter EXPR] [--snapshot-id N]
                             [--transform SPEC.json]
    icefloe load --refresh NAME                     the newest snapshot, reading what changed
    icefloe status [--watch [SECONDS]] [--json]     datasets, nodes, jobs, loads
    icefloe datasets | describe NAME | evict NAME
    icefloe demo

Commands other than ``up`` and ``demo`` talk to ``--head`` (or $ICEFLOE_HEAD),
with ``--token-file`` (or $ICEFLOE_TOKEN) and ``--tls-root-certs``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from typing import Any

from .errors import Error


def _client(args: argparse.Namespace):
    from .client import Client

    if not args.head:
        raise SystemExit("icefloe: no head given (use --head or set ICEFLOE_HEAD)")
    token = os.environ.get("ICEFLOE_TOKEN")
    if args.token_file:
        with open(args.token_file) as f:
            token = f.read().strip()
    return Client(args.head, token=token, tls_root_certs=args.tls_root_certs)


def _print(obj: Any) -> None:
    def default(o: Any) -> Any:
        return str(o)

    print(json.dumps(obj, indent=2, default=default))


def _progress_bar():
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency of the dev setup
        return None, lambda report: None
    bar = tqdm(total=0, unit="file", desc="loading", leave=False)

    def update(report: dict[str, Any]) -> None:
        bar.total = report.get("tasks_total", 0)
        bar.n = min(report.get("tasks_done", 0), bar.total)
        bar.refresh()

    return bar, update


def cmd_up(args: argparse.Namespace) -> int:
    from .local import LocalCluster

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    secret = None
    if args.cluster_secret_file:
        with open(args.cluster_secret_file) as f:
            secret = f.read().strip()
    # Without one, LocalCluster makes a random cluster secret: nodes take node
    # actions only from this cluster's head.
    head_args = ["--follow", str(args.follow)] if args.follow else []
    with LocalCluster(num_nodes=args.nodes, memory_limit=args.memory_limit,
                      cluster_secret=secret, keep_logs=True, head_args=head_args) as cluster:
        print(f"icefloe cluster up: head {cluster.head_uri}")
        print(f"  nodes: {', '.join(cluster.node_uris)}")
        print(f"  logs:  {cluster.log_dir}")
        print(f"  try:   icefloe --head {cluster.head_uri} status")
        sys.stdout.flush()
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
        print("shutting down")
    return 0


def _read_transform(path: str) -> dict[str, Any]:
    """The transform spec in JSON file ``path`` (docs/transforms.md), or a
    SystemExit naming the file and what is wrong with it."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise SystemExit(f"icefloe: cannot read the transform file {path}: "
                         f"{exc.strerror or exc}") from None
    try:
        spec = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SystemExit(f"icefloe: the transform file {path} is not valid JSON: {exc}") \
            from None
    if not isinstance(spec, dict):
        raise SystemExit(f"icefloe: the transform file {path} must hold a JSON object "
                         f"(keep, columns, pack), not {type(spec).__name__}")
    return spec


def cmd_load(args: argparse.Namespace) -> int:
    if args.refresh:
        return _cmd_refresh(args)
    if args.source is None:
        raise SystemExit("icefloe load: give the table's SOURCE (or --refresh for a cached NAME)")
    # The spec is read before connecting: a bad file is the user's first error.
    extra = {"transform": _read_transform(args.transform)} if args.transform else {}
    bar, update = _progress_bar()
    with _client(args) as client:
        columns = [c for c in args.columns.split(",") if c] if args.columns else None
        desc = client.load(args.name, args.source, columns=columns, filter=args.filter,
                           snapshot_id=args.snapshot_id, ref=args.ref,
                           batch_rows=_batch_rows(args), replication=args.replication,
                           progress=update, **extra)
    if bar is not None:
        bar.close()
    print(f"loaded {desc['name']}: {desc['rows']:,} rows, {desc['bytes'] / 2**20:.1f} MiB "
          f"in {desc['load_seconds']:.2f}s")
    return 0


def _batch_rows(args: argparse.Namespace) -> int | None:
    """--batch-rows, or its deprecated former name --batch-size (with a warning)."""
    if args.batch_size_deprecated is None:
        return args.batch_rows
    if args.batch_rows is not None:
        raise SystemExit("icefloe load: give --batch-rows only (--batch-size is its deprecated "
                         "name)")
    print("icefloe load: --batch-size is deprecated, use --batch-rows (rows per cached record "
          "batch)", file=sys.stderr)
    return args.batch_size_deprecated


def _cmd_refresh(args: argparse.Namespace) -> int:
    given = [flag for flag, value in (("SOURCE", args.source), ("--columns", args.columns),
                                      ("--filter", args.filter), ("--transform", args.transform),
                                      ("--snapshot-id", args.snapshot_id), ("--ref", args.ref),
                                      ("--batch-rows", _batch_rows(args))) if value is not None]
    if given:
        raise SystemExit(f"icefloe load --refresh: {', '.join(given)} cannot be given: a refresh "
                         "keeps the arguments the dataset was loaded with")
    bar, update = _progress_bar()
    with _client(args) as client:
        desc = client.refresh(args.name, progress=update)
    if bar is not None:
        bar.close()
    r = desc.get("refresh")
    if r is None:  # nothing to diff against (e.g. the columns changed): a full load
        print(f"loaded {desc['name']}: {desc['rows']:,} rows in {desc['load_seconds']:.2f}s")
    else:
        print(f"refreshed {desc['name']} to snapshot {desc['snapshot_id']}: {desc['rows']:,} rows "
              f"({r['rows_reused']:,} kept, {r['rows_read']:,} read, {r['rows_dropped']:,} "
              f"dropped; {r['files_added']} files added, {r['files_removed']} removed) in "
              f"{desc['load_seconds']:.2f}s")
    return 0


def cmd_status(args: argparse.Namespace, client: Any) -> int:
    from ._status_text import render

    if args.json:
        _print(client.status())
        return 0
    # --watch: redraw until Ctrl-C (or --count redraws, for tests).
    shown = 0
    while True:
        text = render(client.status())
        if args.watch is not None and sys.stdout.isatty():
            sys.stdout.write("\033[H\033[2J")  # clear the screen
        sys.stdout.write(text)
        sys.stdout.flush()
        shown += 1
        if args.watch is None or (args.count and shown >= args.count):
            return 0
        try:
            time.sleep(args.watch)
        except KeyboardInterrupt:
            return 0
        print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="icefloe", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--head", default=os.environ.get("ICEFLOE_HEAD"))
    parser.add_argument("--token-file")
    parser.add_argument("--tls-root-certs")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="run a local cluster in the foreground")
    up.add_argument("--nodes", type=int, default=3)
    up.add_argument("--memory-limit", default="4GiB")
    up.add_argument("--cluster-secret-file",
                    help="secret that signs tickets and node actions (default: a fresh one)")
    up.add_argument("--follow", type=int, default=0, metavar="SECONDS",
                    help="every SECONDS, reload datasets whose table has a new snapshot "
                         "(the head's --follow; default 0: off)")
    load = sub.add_parser("load", help="load an Iceberg table into the cache")
    load.add_argument("name")
    load.add_argument("source", nargs="?",
                      help="metadata.json location or table directory (not with --refresh)")
    load.add_argument("--refresh", action="store_true",
                      help="load the newest snapshot of the cached dataset NAME, reading only "
                           "what changed")
    load.add_argument("--columns")
    load.add_argument("--filter")
    load.add_argument("--snapshot-id", type=int)
    load.add_argument("--ref")
    load.add_argument("--batch-rows", type=int,
                      help="rows per cached record batch (default: the nodes'); not a "
                           "reader's batch size, which each epoch picks")
    load.add_argument("--batch-size", type=int, dest="batch_size_deprecated",
                      help=argparse.SUPPRESS)
    load.add_argument("--replication", type=int, default=1)
    load.add_argument("--transform", metavar="SPEC.json",
                      help="a JSON file with the transform to run on the nodes as they load "
                           "(keep, columns: expr, tokenize or chat, pack; docs/transforms.md)")
    sub.add_parser("datasets", help="list datasets")
    status = sub.add_parser("status", help="datasets, nodes, jobs reading now, loads")
    status.add_argument("--watch", type=float, nargs="?", const=2.0, metavar="SECONDS",
                        help="redraw every SECONDS (default 2) until Ctrl-C")
    status.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    status.add_argument("--json", action="store_true", help="print the raw status JSON")
    describe = sub.add_parser("describe", help="one dataset with its slices")
    describe.add_argument("name")
    evict = sub.add_parser("evict", help="drop a dataset from the cache")
    evict.add_argument("name")
    sub.add_parser("demo", help="run the quick-start demo")
    args = parser.parse_args(argv)

    try:
        if args.command == "up":
            return cmd_up(args)
        if args.command == "demo":
            from icefloe_demo.run import main as demo

            return demo([])
        if args.command == "load":
            return cmd_load(args)
        with _client(args) as client:
            if args.command == "datasets":
                _print(client.datasets())
            elif args.command == "status":
                return cmd_status(args, client)
            elif args.command == "describe":
                _print(client.describe(args.name))
            elif args.command == "evict":
                _print(client.evict(args.name))
        return 0
    except Error as exc:
        print(f"icefloe: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
