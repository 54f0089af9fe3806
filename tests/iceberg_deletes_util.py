"""Row-level delete fixtures (Iceberg v2) for tables that pyiceberg wrote.

pyiceberg 0.12 cannot write position or equality delete files, so these
helpers build them directly, the way a Java/Spark writer lays them out:

- the delete files are Parquet written with pyarrow, columns carrying their
  Iceberg field ids (`file_path` 2147483546 and `pos` 2147483545 for position
  deletes, sorted by both; the table's own columns for equality deletes);
- `commit_files` writes one manifest per (data or deletes, partition spec) with
  fastavro, using the manifest_entry Avro schema pyiceberg generates for the
  spec: `content` metadata "deletes" (or "data" for data files committed in the
  same snapshot), entries with status 1 (added) and null sequence numbers
  (inherited); then a manifest list holding those plus the parent snapshot's
  manifests unchanged (delete manifests with content 1); then commits the
  snapshot through pyiceberg's catalog (`AddSnapshotUpdate` +
  `SetSnapshotRefUpdate`), which writes the new metadata.json and moves the
  SqlCatalog pointer.

`expected_scan` is the oracle: it reads the manifests with fastavro and the
data and delete files with pyarrow, and applies the spec's rules itself:

- a position delete applies to a data file when the data file's data sequence
  number is <= the delete's, the partitions (spec id and values) are equal, and
  `referenced_data_file` (when set) names the data file;
- an equality delete applies when the data file's data sequence number is
  strictly less than the delete's, in the same partition, or anywhere when the
  delete file's spec is unpartitioned; null equals null.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import data_file_with_partition, manifest_entry_schema_with_data_file
from pyiceberg.table import Table
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, AssertRefSnapshotId, SetSnapshotRefUpdate
from pyiceberg.types import LongType, PrimitiveType, StringType
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

FILE_PATH_ID = 2147483546
POS_ID = 2147483545
POSITION_DELETE_SCHEMA = pa.schema([
    pa.field("file_path", pa.string(), nullable=False,
             metadata={b"PARQUET:field_id": str(FILE_PATH_ID).encode()}),
    pa.field("pos", pa.int64(), nullable=False,
             metadata={b"PARQUET:field_id": str(POS_ID).encode()}),
])

DATA = 0
POSITION_DELETES = 1
EQUALITY_DELETES = 2


def local_path(location: str) -> str:
    """A local file's path from its `file://` location (or a plain path)."""
    parsed = urlparse(location)
    return parsed.path if parsed.scheme in ("file", "") else location


@dataclass
class ContentFile:
    """A data or delete file written to disk, and what its manifest entry says."""

    content: int
    location: str
    record_count: int
    file_size_in_bytes: int
    spec_id: int
    partition: dict[str, Any] = field(default_factory=dict)
    equality_ids: list[int] | None = None
    referenced_data_file: str | None = None
    value_counts: dict[int, int] = field(default_factory=dict)
    null_value_counts: dict[int, int] = field(default_factory=dict)
    lower_bounds: dict[int, bytes] = field(default_factory=dict)
    upper_bounds: dict[int, bytes] = field(default_factory=dict)


def _new_location(table: Table, kind: str, partition: dict[str, Any]) -> str:
    subdir = "/".join(f"{k}={v}" for k, v in partition.items())
    name = f"{kind}-{uuid.uuid4()}.parquet"
    return f"{table.location()}/data/{subdir + '/' if subdir else ''}{name}"


def _write_parquet(data: pa.Table, location: str, row_group_size: int | None) -> int:
    path = Path(local_path(location))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(data, path, row_group_size=row_group_size)
    return path.stat().st_size


def _column_stats(data: pa.Table, ids: list[int], types: list[PrimitiveType], out: ContentFile):
    for name, field_id, iceberg_type in zip(data.column_names, ids, types, strict=True):
        column = data.column(name)
        out.value_counts[field_id] = len(column)
        out.null_value_counts[field_id] = column.null_count
        bounds = pc.min_max(column)
        if bounds["min"].is_valid:
            out.lower_bounds[field_id] = to_bytes(iceberg_type, bounds["min"].as_py())
            out.upper_bounds[field_id] = to_bytes(iceberg_type, bounds["max"].as_py())


def _spec_id(table: Table, spec_id: int | None) -> int:
    return table.spec().spec_id if spec_id is None else spec_id


def write_position_deletes(table: Table, deletes: list[tuple[str, int]], *,
                           spec_id: int | None = None, partition: dict[str, Any] | None = None,
                           referenced_data_file: str | None = None,
                           row_group_size: int | None = None) -> ContentFile:
    """A position delete file deleting (data file location, row position) pairs,
    sorted by (file_path, pos) as the spec requires. Duplicates are kept."""
    pairs = sorted(deletes)
    data = pa.table([pa.array([p for p, _ in pairs], pa.string()),
                     pa.array([n for _, n in pairs], pa.int64())],
                    schema=POSITION_DELETE_SCHEMA)
    partition = partition or {}
    location = _new_location(table, "pos-deletes", partition)
    size = _write_parquet(data, location, row_group_size)
    out = ContentFile(POSITION_DELETES, location, data.num_rows, size,
                     _spec_id(table, spec_id), partition,
                     referenced_data_file=referenced_data_file)
    _column_stats(data, [FILE_PATH_ID, POS_ID], [StringType(), LongType()], out)
    return out


def write_equality_deletes(table: Table, keys: pa.Table | dict[str, list], *,
                           spec_id: int | None = None,
                           partition: dict[str, Any] | None = None) -> ContentFile:
    """An equality delete file over `keys`' columns (table columns by name):
    a row whose values equal one of these rows in those columns is deleted."""
    schema = table.schema()
    if isinstance(keys, dict):
        keys = pa.table(keys)
    arrow_schema = schema.as_arrow()
    fields, ids, types = [], [], []
    for name in keys.column_names:
        iceberg_field = schema.find_field(name)
        arrow_field = arrow_schema.field(name)
        field_id = str(iceberg_field.field_id).encode()
        fields.append(pa.field(name, arrow_field.type, metadata={b"PARQUET:field_id": field_id}))
        ids.append(iceberg_field.field_id)
        types.append(iceberg_field.field_type)
    data = keys.cast(pa.schema(fields))
    partition = partition or {}
    location = _new_location(table, "eq-deletes", partition)
    size = _write_parquet(data, location, None)
    out = ContentFile(EQUALITY_DELETES, location, data.num_rows, size,
                     _spec_id(table, spec_id), partition, equality_ids=ids)
    _column_stats(data, ids, types, out)
    return out


def write_data_file(table: Table, rows: pa.Table, *, spec_id: int | None = None,
                    partition: dict[str, Any] | None = None) -> ContentFile:
    """A data file of `rows` (table columns by name) with the table's field
    ids, to commit with `commit_files` (e.g. with deletes in the same commit)."""
    schema = table.schema()
    arrow_schema = schema.as_arrow()
    data = rows.select(arrow_schema.names).cast(arrow_schema)
    partition = partition or {}
    location = _new_location(table, "data", partition)
    size = _write_parquet(data, location, None)
    out = ContentFile(DATA, location, data.num_rows, size, _spec_id(table, spec_id), partition)
    _column_stats(data, [f.field_id for f in schema.fields], [f.field_type for f in schema.fields],
                  out)
    return out


def _manifest_avro_schema(table: Table, spec_id: int, equality_ids_type: str) -> dict:
    """pyiceberg's v2 manifest_entry Avro schema for a spec, plus
    `referenced_data_file` (143, optional in v2); equality ids as `int` (the
    spec's type) or `long` (what pyiceberg's own schema says)."""
    spec = table.specs()[spec_id]
    data_file = data_file_with_partition(spec.partition_type(table.schema()), 2)
    schema = AvroSchemaConversion().iceberg_to_avro(
        manifest_entry_schema_with_data_file(2, data_file), schema_name="manifest_entry")
    schema = copy.deepcopy(schema)
    data_file = next(f for f in schema["fields"] if f["name"] == "data_file")
    data_file_fields = data_file["type"]["fields"]
    for f in data_file_fields:
        if f["name"] == "equality_ids":
            f["type"][1]["items"] = equality_ids_type
    data_file_fields.append({"name": "referenced_data_file", "field-id": 143,
                             "type": ["null", "string"], "default": None})
    return schema


def _kv(values: dict[int, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": v} for k, v in sorted(values.items())]


def _partition_summaries(table: Table, spec_id: int, files: list[ContentFile]) -> list[dict]:
    spec = table.specs()[spec_id]
    summaries = []
    for pf in spec.partition_type(table.schema()).fields:
        values = [f.partition.get(pf.name) for f in files]
        present = [v for v in values if v is not None]
        summaries.append({
            "contains_null": len(present) < len(values),
            "contains_nan": False,
            "lower_bound": to_bytes(pf.field_type, min(present)) if present else None,
            "upper_bound": to_bytes(pf.field_type, max(present)) if present else None,
        })
    return summaries


def _write_manifest(table: Table, spec_id: int, content: int, files: list[ContentFile],
                    snapshot_id: int, sequence_number: int, equality_ids_type: str) -> dict:
    """Writes one manifest (content 0: data files, 1: delete files) of added
    entries; returns its manifest-list record."""
    spec = table.specs()[spec_id]
    location = f"{table.location()}/metadata/{uuid.uuid4()}-m0.avro"
    entries = []
    for f in files:
        entries.append({
            "status": 1,
            "snapshot_id": snapshot_id,
            "sequence_number": None,
            "file_sequence_number": None,
            "data_file": {
                "content": f.content,
                "file_path": f.location,
                "file_format": "PARQUET",
                "partition": {pf.name: f.partition.get(pf.name)
                              for pf in spec.partition_type(table.schema()).fields},
                "record_count": f.record_count,
                "file_size_in_bytes": f.file_size_in_bytes,
                "column_sizes": None,
                "value_counts": _kv(f.value_counts),
                "null_value_counts": _kv(f.null_value_counts),
                "nan_value_counts": None,
                "lower_bounds": _kv(f.lower_bounds),
                "upper_bounds": _kv(f.upper_bounds),
                "key_metadata": None,
                "split_offsets": None,
                "equality_ids": f.equality_ids,
                "sort_order_id": None,
                "referenced_data_file": f.referenced_data_file,
            },
        })
    metadata = {
        "schema": table.schema().model_dump_json(),
        "partition-spec": json.dumps(json.loads(spec.model_dump_json())["fields"]),
        "partition-spec-id": str(spec_id),
        "format-version": "2",
        "content": "deletes" if content else "data",
    }
    path = Path(local_path(location))
    with open(path, "wb") as out:
        fastavro.writer(out, fastavro.parse_schema(
            _manifest_avro_schema(table, spec_id, equality_ids_type)), entries,
            metadata=metadata, codec="deflate")
    return {
        "manifest_path": location,
        "manifest_length": path.stat().st_size,
        "partition_spec_id": spec_id,
        "content": content,
        "sequence_number": sequence_number,
        "min_sequence_number": sequence_number,
        "added_snapshot_id": snapshot_id,
        "added_files_count": len(files),
        "existing_files_count": 0,
        "deleted_files_count": 0,
        "added_rows_count": sum(f.record_count for f in files),
        "existing_rows_count": 0,
        "deleted_rows_count": 0,
        "partitions": _partition_summaries(table, spec_id, files),
        "key_metadata": None,
    }


def commit_files(table: Table, files: list[ContentFile], *,
                 equality_ids_type: str = "int") -> Snapshot:
    """Commits a new snapshot of `table` (on main) that adds `files`: a data
    and a delete manifest per partition spec as needed, and a manifest list
    that keeps the parent snapshot's manifests. Returns the new snapshot."""
    table.refresh()
    metadata = table.metadata
    parent = table.current_snapshot()
    assert metadata.format_version == 2 and parent is not None
    snapshot_id = uuid.uuid4().int >> 65  # a positive 63-bit id
    sequence_number = metadata.last_sequence_number + 1

    with open(local_path(parent.manifest_list), "rb") as f:
        reader = fastavro.reader(f)
        list_schema = reader.writer_schema
        manifests = list(reader)
    groups: dict[tuple[int, int], list[ContentFile]] = {}
    for f in files:
        groups.setdefault((min(f.content, 1), f.spec_id), []).append(f)
    added = [_write_manifest(table, spec_id, content, group, snapshot_id, sequence_number,
                             equality_ids_type)
             for (content, spec_id), group in sorted(groups.items())]
    manifest_list = (f"{table.location()}/metadata/"
                     f"snap-{snapshot_id}-0-{uuid.uuid4()}.avro")
    with open(local_path(manifest_list), "wb") as out:
        fastavro.writer(out, fastavro.parse_schema(list_schema), added + manifests, metadata={
            "snapshot-id": str(snapshot_id),
            "parent-snapshot-id": str(parent.snapshot_id),
            "sequence-number": str(sequence_number),
            "format-version": "2",
        }, codec="deflate")

    data = [f for f in files if f.content == DATA]
    position = [f for f in files if f.content == POSITION_DELETES]
    equality = [f for f in files if f.content == EQUALITY_DELETES]
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent.snapshot_id,
        sequence_number=sequence_number,
        timestamp_ms=max(int(time.time() * 1000), parent.timestamp_ms + 1),
        manifest_list=manifest_list,
        summary=Summary(Operation.OVERWRITE if data else Operation.DELETE, **{
            "added-data-files": str(len(data)),
            "added-records": str(sum(f.record_count for f in data)),
            "added-delete-files": str(len(position) + len(equality)),
            "added-position-delete-files": str(len(position)),
            "added-equality-delete-files": str(len(equality)),
            "added-position-deletes": str(sum(f.record_count for f in position)),
            "added-equality-deletes": str(sum(f.record_count for f in equality)),
        }),
        schema_id=metadata.current_schema_id,
    )
    table.catalog.commit_table(
        table,
        (AssertRefSnapshotId(snapshot_id=parent.snapshot_id, ref=MAIN_BRANCH),),
        (AddSnapshotUpdate(snapshot=snapshot),
         SetSnapshotRefUpdate(snapshot_id=snapshot_id, parent_snapshot_id=parent.snapshot_id,
                              ref_name=MAIN_BRANCH, type=SnapshotRefType.BRANCH)),
    )
    table.refresh()
    assert table.current_snapshot().snapshot_id == snapshot_id
    return table.current_snapshot()


# --- The oracle -------------------------------------------------------------


@dataclass
class Entry:
    """A live manifest entry, as the oracle sees it."""

    content: int
    path: str
    spec_id: int
    partition: tuple
    sequence_number: int
    equality_ids: list[int] | None
    referenced_data_file: str | None


def live_entries(table: Table, snapshot_id: int | None = None) -> list[Entry]:
    """Live manifest entries of a snapshot (default: the current one), with
    inherited sequence numbers."""
    snapshot = (table.snapshot_by_id(snapshot_id) if snapshot_id is not None
                else table.current_snapshot())
    with open(local_path(snapshot.manifest_list), "rb") as f:
        manifests = list(fastavro.reader(f))
    out = []
    for m in manifests:
        with open(local_path(m["manifest_path"]), "rb") as f:
            for e in fastavro.reader(f):
                if e["status"] == 2:
                    continue
                seq = e["sequence_number"]
                if seq is None:
                    assert e["status"] == 1, "only added entries inherit sequence numbers"
                    seq = m["sequence_number"]
                df = e["data_file"]
                out.append(Entry(df.get("content", 0), df["file_path"], m["partition_spec_id"],
                                  tuple(df["partition"].values()), seq, df.get("equality_ids"),
                                  df.get("referenced_data_file")))
    return out


def live_data_files(table: Table, snapshot_id: int | None = None) -> list[Entry]:
    """A snapshot's live data files, by data sequence number, then path."""
    data = [e for e in live_entries(table, snapshot_id) if e.content == DATA]
    return sorted(data, key=lambda e: (e.sequence_number, e.path))


def applies(delete: Entry, data: Entry, table: Table) -> bool:
    """Whether a delete file applies to a data file (the spec's rules)."""
    same_partition = (delete.spec_id, delete.partition) == (data.spec_id, data.partition)
    if delete.content == POSITION_DELETES:
        if delete.referenced_data_file is not None and delete.referenced_data_file != data.path:
            return False
        return data.sequence_number <= delete.sequence_number and same_partition
    global_delete = table.specs()[delete.spec_id].is_unpartitioned()
    return data.sequence_number < delete.sequence_number and (same_partition or global_delete)


def expected_scan(table: Table, snapshot_id: int | None = None
                  ) -> tuple[pa.Table, dict[str, set[str]]]:
    """The rows of a snapshot after deletes (before any filter), in the table's
    current Arrow schema, and for each live data file the delete files that
    apply to it. The tables here do not evolve their schema, so data files are
    read by column name."""
    schema = table.schema()
    arrow_schema = schema.as_arrow()
    entries = live_entries(table, snapshot_id)
    data_files = [e for e in entries if e.content == DATA]
    delete_files = [e for e in entries if e.content != DATA]
    parts, attached = [], {}
    for data in data_files:
        rows = pq.read_table(local_path(data.path)).select(arrow_schema.names).cast(arrow_schema)
        keep = [True] * rows.num_rows
        deletes = [d for d in delete_files if applies(d, data, table)]
        attached[data.path] = {d.path for d in deletes}
        for d in deletes:
            deleted = pq.read_table(local_path(d.path))
            if d.content == POSITION_DELETES:
                mine = deleted.filter(pc.equal(deleted["file_path"], data.path))
                for pos in mine["pos"].to_pylist():
                    keep[pos] = False
                continue
            names = [schema.find_column_name(i) for i in d.equality_ids]
            keys = set(zip(*(deleted[n].to_pylist() for n in names), strict=True))
            for i, key in enumerate(zip(*(rows[n].to_pylist() for n in names), strict=True)):
                if key in keys:
                    keep[i] = False
        parts.append(rows.filter(pa.array(keep, pa.bool_())))
    result = pa.concat_tables(parts) if parts else arrow_schema.empty_table()
    return result, attached
