"""Run by tests/test_client_venv.py with the interpreter of a separate venv
that holds only the icefloe and icefloe-server wheels, a pinned pyarrow and
numpy: starts a LocalCluster there, loads an Iceberg table, and writes what
the client read (an epoch per rank, a take, a resume; over shared memory and
over TCP) as Arrow IPC files for the test to check with its own pyarrow.

Usage: python client_venv_reader.py METADATA_LOCATION OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa

import icefloe

PLAN = {"seed": 11, "epoch": 2, "world_size": 2, "drop_last": False}
BATCH = 96
RESUME_STEPS = 3
TAKE = [1999, 0, 777, 777, 1500, 3, 1998]


def _write(path: Path, batches: list[pa.RecordBatch]) -> list[int]:
    table = pa.Table.from_batches(batches)
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, table.schema) as w:
        w.write_table(table)
    return [b.num_rows for b in batches]


def main(location: str, out: Path) -> None:
    report: dict = {"pyarrow": pa.__version__, "icefloe": icefloe.__file__, "reads": {}}
    with icefloe.LocalCluster(num_nodes=2, memory_limit="256MiB") as cluster:
        with cluster.client() as client:
            client.load("t", location, batch_rows=250)
        for path in ("shared", "tcp"):
            with cluster.client(share_memory=path == "shared") as client:
                for rank in range(PLAN["world_size"]):
                    batches = list(client.iter_epoch("t", batch_size=BATCH, rank=rank, **PLAN))
                    report["reads"][f"{path}-epoch-{rank}"] = _write(
                        out / f"{path}-epoch-{rank}.arrow", batches)
                # Rank 0 resumes after RESUME_STEPS steps, as from a checkpoint.
                resumed = list(client.iter_epoch(
                    "t", batch_size=BATCH, rank=0, resume_steps=RESUME_STEPS,
                    resume_world_size=PLAN["world_size"], resume_batch_size=BATCH, **PLAN))
                report["reads"][f"{path}-resume-0"] = _write(out / f"{path}-resume-0.arrow",
                                                            resumed)
                taken = client.take("t", TAKE)
                report["reads"][f"{path}-take"] = _write(out / f"{path}-take.arrow",
                                                        taken.to_batches())
    (out / "report.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
