"""A training pod's view of the Kubeflow cache, run inside the client network namespace.

tests/test_image.py starts this with `ip netns exec <client> python image_client.py ...`:
the only way into the pods' network is from a namespace on it. It prints one JSON
document on stdout.

  ready URL... [--timeout S]   GET each URL until all answer 200 or the time is up;
                               {url: [status, body]} (status 0: unreachable)
  read HEAD --combos 1x1,2x3   for every (world_size, num_workers) combination, every
                               (rank, dataloader worker) consumer reads its shard the way
                               Kubeflow's dataset does (PATH descriptor, sequential DoGet per
                               endpoint, re-chunked to 128 rows, from_arrow_rb_to_tensor);
                               [{world_size, num_workers, index, total, ids | error,
                                 locations, max_chunk}]
  refused HEAD                 what a client without the token gets from the head, and from
                               each endpoint with the head's tickets; {call: error}
Options for read/refused: --tls-roots PEM (grpc+tls), --token-file F (bearer token).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import pyarrow as pa
import pyarrow.flight as flight


class KubeflowStyleDataset:
    """The Kubeflow example's reading loop, from shared/design/kubeflow-compat.md."""

    def __init__(self, head: str, world_size: int, rank: int, num_workers: int, worker: int,
                 connect, options: flight.FlightCallOptions, seed: int = 0,
                 batch_size: int = 128) -> None:
        self.head = head
        self.total = num_workers * world_size
        self.index = (worker * world_size + rank + seed) % self.total
        self.batch_size = batch_size
        self.connect = connect
        self.options = options
        self.locations: list[str] = []

    def from_arrow_rb_to_tensor(self, chunk: pa.RecordBatch):
        yield {"id": np.asarray(chunk.column("id"))}

    def __iter__(self):
        info = self.connect(self.head).get_flight_info(
            flight.FlightDescriptor.for_path(str(self.index), str(self.total)), self.options)
        for endpoint in info.endpoints:
            location = endpoint.locations[0].uri.decode()
            self.locations.append(location)
            reader = self.connect(location).do_get(endpoint.ticket, self.options)
            for batch in reader:
                rb = batch.data
                for start in range(0, rb.num_rows, self.batch_size):
                    yield from self.from_arrow_rb_to_tensor(rb.slice(start, self.batch_size))


def connector(tls_roots: str | None):
    roots = open(tls_roots, "rb").read() if tls_roots else None
    clients: dict[str, flight.FlightClient] = {}

    def connect(location: str) -> flight.FlightClient:
        if location not in clients:
            kwargs = {"tls_root_certs": roots} if roots else {}
            clients[location] = flight.connect(location, **kwargs)
        return clients[location]

    return connect


def call_options(token_file: str | None) -> flight.FlightCallOptions:
    if not token_file:
        return flight.FlightCallOptions(timeout=30)
    token = open(token_file).read().strip()
    return flight.FlightCallOptions(timeout=30,
                                    headers=[(b"authorization", f"Bearer {token}".encode())])


def ready(urls: list[str], timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        out = {}
        for url in urls:
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    out[url] = [resp.status, resp.read().decode()]
            except urllib.error.HTTPError as exc:
                out[url] = [exc.code, exc.read().decode()]
            except OSError as exc:
                out[url] = [0, str(exc)]
        if all(status == 200 for status, _ in out.values()) or time.monotonic() > deadline:
            return out
        time.sleep(0.1)


def read(head: str, combos: list[tuple[int, int]], connect, options) -> list[dict]:
    results = []
    for world_size, num_workers in combos:
        for rank in range(world_size):
            for worker in range(num_workers):
                ds = KubeflowStyleDataset(head, world_size, rank, num_workers, worker, connect,
                                          options)
                entry = {"world_size": world_size, "num_workers": num_workers,
                         "index": ds.index, "total": ds.total}
                try:
                    chunks = list(ds)
                    ids = np.concatenate([c["id"] for c in chunks]) if chunks else []
                    entry["ids"] = [int(i) for i in ids]
                    entry["max_chunk"] = max((len(c["id"]) for c in chunks), default=0)
                except pa.ArrowException as exc:
                    entry["error"] = f"{type(exc).__name__}: {exc}"
                entry["locations"] = ds.locations
                results.append(entry)
    return results


def refused(head: str, connect, token_file: str | None) -> dict:
    """Calls without the token; the head's endpoints come from a call with it."""
    out = {}
    descriptor = flight.FlightDescriptor.for_path("0", "1")
    try:
        connect(head).get_flight_info(descriptor, call_options(None))
        out["GetFlightInfo"] = "accepted"
    except pa.ArrowException as exc:
        out["GetFlightInfo"] = f"{type(exc).__name__}: {exc}"
    info = connect(head).get_flight_info(descriptor, call_options(token_file))
    for endpoint in info.endpoints:
        location = endpoint.locations[0].uri.decode()
        try:
            connect(location).do_get(endpoint.ticket, call_options(None)).read_all()
            out[f"DoGet {location}"] = "accepted"
        except pa.ArrowException as exc:
            out[f"DoGet {location}"] = f"{type(exc).__name__}: {exc}"
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["ready", "read", "refused"])
    parser.add_argument("targets", nargs="+")
    parser.add_argument("--timeout", type=float, default=0)
    parser.add_argument("--combos", default="1x1")
    parser.add_argument("--tls-roots")
    parser.add_argument("--token-file")
    args = parser.parse_args()
    if args.command == "ready":
        out = ready(args.targets, args.timeout)
    else:
        connect = connector(args.tls_roots)
        if args.command == "read":
            combos = [tuple(int(n) for n in c.split("x")) for c in args.combos.split(",")]
            out = read(args.targets[0], combos, connect, call_options(args.token_file))
        else:
            out = refused(args.targets[0], connect, args.token_file)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
