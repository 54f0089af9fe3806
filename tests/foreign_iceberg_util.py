"""Iceberg tables that other engines wrote (../shared/testdata/foreign-iceberg).

Their metadata names files by paths that only resolve where they were written
(see that directory's README):

- Impala's tables use absolute `/test-warehouse/...` paths. `ForeignTables`
  builds a scratch tree of symlinks laid out as those paths expect and points a
  temporary `/test-warehouse` symlink at it (only as root, and never over an
  existing `/test-warehouse`); `close()` removes it.
- duckdb-iceberg's tables use paths relative to duckdb-iceberg's repository
  root (`data/persistent/<t>/...`). The same scratch tree holds symlinks at
  those relative paths; callers chdir into `cwd` before starting icefloe or
  reading with pyiceberg, which both resolve relative paths against the cwd.

Nothing is copied: the tree holds symlinks only.

`oracle_rows` is what a correct reader returns: pyiceberg's scan where it can
read the table; otherwise its own planning and reading (schema evolution, name
mapping, partition values, position deletes) with equality deletes applied by
the spec's rules, which pyiceberg 0.12 refuses to do.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import DataFileContent
from pyiceberg.table import StaticTable

REPO = Path(__file__).resolve().parents[1]
ROOT = REPO.parent / "shared" / "testdata" / "foreign-iceberg"
WAREHOUSE_LINK = Path("/test-warehouse")


def table_dirs() -> list[Path]:
    """Every table directory under ROOT (impala/<t>, duckdb-iceberg/<t>)."""
    if not ROOT.is_dir():
        return []
    return sorted(p for p in ROOT.glob("*/*") if (p / "metadata").is_dir())


def metadata_file(table_dir: Path) -> Path:
    """The newest metadata file: highest vN.metadata.json or NNNNN-*.metadata.json."""
    def version(p: Path) -> int:
        m = re.match(r"v?(\d+)", p.name)
        return int(m.group(1)) if m else -1
    return max((table_dir / "metadata").glob("*.metadata.json"), key=version)


def written_root(table_dir: Path) -> str:
    """The table directory as the table's own metadata names it (from its
    manifest lists, which, unlike `location`, are always right)."""
    meta = json.loads(metadata_file(table_dir).read_text())
    for snapshot in meta.get("snapshots", []):
        for path in [snapshot.get("manifest-list"), *snapshot.get("manifests", [])]:
            if path:
                return path.split("/metadata/")[0]
    return meta["location"]


class ForeignTables:
    """The scratch tree of symlinks; see the module docstring."""

    def __init__(self) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="foreign-iceberg-"))
        self.cwd = self.scratch / "cwd"
        self.cwd.mkdir()
        self.linked_warehouse = False
        self.warehouse_skip_reason = ""
        needs_warehouse = False
        for table_dir in table_dirs():
            root = written_root(table_dir)
            if root.startswith("/test-warehouse/"):
                needs_warehouse = True
                link = self.scratch / root.lstrip("/")
            elif not root.startswith("/") and "://" not in root:
                link = self.cwd / root
            else:
                continue
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(table_dir)
        if needs_warehouse:
            self._link_warehouse()

    def _link_warehouse(self) -> None:
        if os.geteuid() != 0:
            self.warehouse_skip_reason = "needs root to create the /test-warehouse symlink"
        elif os.path.lexists(WAREHOUSE_LINK):
            self.warehouse_skip_reason = "/test-warehouse already exists; not replacing it"
        else:
            WAREHOUSE_LINK.symlink_to(self.scratch / "test-warehouse")
            self.linked_warehouse = True

    def resolvable(self, table_dir: Path) -> str:
        """Why the table's paths do not resolve here, or "" when they do."""
        root = written_root(table_dir)
        if root.startswith("/test-warehouse/") and not self.linked_warehouse:
            return self.warehouse_skip_reason
        return ""

    def close(self) -> None:
        if self.linked_warehouse and WAREHOUSE_LINK.is_symlink() and \
                os.readlink(WAREHOUSE_LINK) == str(self.scratch / "test-warehouse"):
            WAREHOUSE_LINK.unlink()
        self.linked_warehouse = False
        shutil.rmtree(self.scratch, ignore_errors=True)


def normalize(value: Any) -> Any:
    """One Python form per value, whoever read it (UUIDs as bytes)."""
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    return value


def rows_of(table: pa.Table) -> list[dict[str, Any]]:
    """The rows as dicts, normalized and sorted (row order is not compared)."""
    rows = [normalize(r) for r in table.to_pylist()]
    return sorted(rows, key=lambda r: [(v is None, repr(v)) for v in r.values()])


def sorted_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((normalize(r) for r in rows),
                  key=lambda r: [(v is None, repr(v)) for v in r.values()])


def _equality_deleted(rows: pa.Table, deletes: list[tuple[Any, list[int]]], schema) -> pa.Table:
    """`rows` without those whose values in a delete file's equality columns
    equal one of its rows (null equals null)."""
    keep = [True] * rows.num_rows
    for path, ids in deletes:
        deleted = pq.read_table(path)
        by_id = {int(f.metadata[b"PARQUET:field_id"]): f.name
                 for f in deleted.schema if f.metadata and b"PARQUET:field_id" in f.metadata}
        keys = set(zip(*(deleted[by_id[i]].to_pylist() for i in ids), strict=True))
        names = [schema.find_column_name(i) for i in ids]
        for n, key in enumerate(zip(*(rows[name].to_pylist() for name in names), strict=True)):
            if key in keys:
                keep[n] = False
    return rows.filter(pa.array(keep, pa.bool_()))


def spec_scan(table: StaticTable, snapshot_id: int | None) -> pa.Table:
    """A snapshot's rows read by pyiceberg file by file, with equality deletes
    applied here: to data files with a strictly lower data sequence number, in
    the same partition or anywhere when the delete's spec is unpartitioned."""
    scan = table.scan(snapshot_id=snapshot_id)
    snapshot = scan.snapshot()
    schema = scan.projection()
    entries = [e for m in snapshot.manifests(table.io)
               for e in m.fetch_manifest_entry(table.io, discard_deleted=True)]
    seq = {e.data_file.file_path: e.sequence_number or 0 for e in entries
           if e.data_file.content == DataFileContent.DATA}
    eq = [e for e in entries if e.data_file.content == DataFileContent.EQUALITY_DELETES]
    specs = table.metadata.specs()
    tasks = scan._manifest_planner.plan_files(
        snapshot.manifests(table.io),
        manifest_entry_filter=lambda e: e.data_file.content != DataFileContent.EQUALITY_DELETES)
    parts = []
    for task in tasks:
        data = task.file
        rows = ArrowScan(table.metadata, table.io, schema, AlwaysTrue()).to_table([task])
        applicable = [
            (e.data_file.file_path, list(e.data_file.equality_ids)) for e in eq
            if (e.sequence_number or 0) > seq[data.file_path]
            and (specs[e.data_file.spec_id].is_unpartitioned()
                 or (e.data_file.spec_id == data.spec_id
                     and e.data_file.partition == data.partition))]
        parts.append(_equality_deleted(rows, applicable, schema))
    if not parts:
        return schema.as_arrow().empty_table()
    return pa.concat_tables(parts, promote_options="permissive")


def has_equality_deletes(table: StaticTable, snapshot_id: int | None) -> bool:
    snapshot = table.scan(snapshot_id=snapshot_id).snapshot()
    return any(e.data_file.content == DataFileContent.EQUALITY_DELETES
               for m in snapshot.manifests(table.io)
               for e in m.fetch_manifest_entry(table.io, discard_deleted=True))


def oracle_rows(metadata: Path, snapshot_id: int | None) -> list[dict[str, Any]]:
    """What a correct reader returns for the snapshot (all columns)."""
    table = StaticTable.from_metadata(str(metadata))
    if has_equality_deletes(table, snapshot_id):
        return rows_of(spec_scan(table, snapshot_id))
    return rows_of(table.scan(snapshot_id=snapshot_id).to_arrow())
