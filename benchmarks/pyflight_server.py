"""Baseline: a plain Python ``pyarrow.flight`` server holding the table in memory.

    python -m benchmarks.pyflight_server --batch-rows 8192 FILE.parquet ...

Reads the Parquet files into one in-memory table cut into batch-rows batches,
prints ``pyflight ready location=grpc://127.0.0.1:PORT ...`` and serves ``do_get`` of the
whole table (any ticket) until killed. This is what a user could write in ten
lines instead of running a cache.
"""

from __future__ import annotations

import argparse

import pyarrow as pa
import pyarrow.flight as flight
import pyarrow.parquet as pq


class TableServer(flight.FlightServerBase):
    def __init__(self, location: str, table: pa.Table) -> None:
        super().__init__(location)
        self.table = table

    def do_get(self, context, ticket):  # noqa: ARG002 - any ticket reads the whole table
        return flight.RecordBatchStream(self.table)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="+")
    parser.add_argument("--batch-rows", type=int, default=8192)
    parser.add_argument("--location", default="grpc://127.0.0.1:0")
    args = parser.parse_args()
    table = pa.concat_tables(pq.read_table(f) for f in args.files).combine_chunks()
    table = pa.Table.from_batches(table.to_batches(max_chunksize=args.batch_rows))
    server = TableServer(args.location, table)
    host = args.location.split("://", 1)[1].rsplit(":", 1)[0]
    scheme = args.location.split("://", 1)[0]
    where = f"{scheme}://{host}:{server.port}" if scheme != "grpc+unix" else args.location
    # The line icefloe._process.ServerProcess waits for.
    print(f"pyflight ready location={where} health=none rows={table.num_rows}", flush=True)
    server.serve()


if __name__ == "__main__":
    main()
