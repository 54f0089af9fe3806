"""Regenerates the Avro fixtures of avro_test.cc with independent writers.

    .venv/bin/python cpp/icefloe/iceberg/testdata/avro/make_fixtures.py

fastavro writes the generic files (every type, each codec, several blocks) and an
Iceberg-style manifest; pyiceberg writes a real v2 manifest and manifest list. For each
`<name>.avro` the script also writes `<name>.json`: the objects as fastavro reads them back,
in the canonical JSON that avro_test.cc builds from AvroValue (bytes and fixed as
{"$bytes": hex}, enums as their symbol, unions as the branch value, logical types as their
underlying value). The fastavro files are byte-for-byte reproducible (fixed seed and sync
marker); the pyiceberg files carry fresh ids and timestamps on each run.
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import random
import shutil
import tempfile

import fastavro

HERE = os.path.dirname(os.path.abspath(__file__))
SYNC = bytes(range(0x30, 0x40))

ALL_TYPES = {
    "type": "record",
    "name": "AllTypes",
    "namespace": "icefloe.test",
    "fields": [
        {"name": "n", "type": "null"},
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "by", "type": "bytes"},
        {"name": "fx", "type": {"type": "fixed", "name": "Quad", "size": 4}},
        {
            "name": "e",
            "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]},
        },
        {
            "name": "point",
            "type": {
                "type": "record",
                "name": "Point",
                "namespace": "geo",
                "fields": [{"name": "x", "type": "double"}, {"name": "y", "type": "double"}],
            },
        },
        {"name": "points", "type": {"type": "array", "items": "geo.Point"}},
        {"name": "tags", "type": {"type": "map", "values": "long"}},
        {"name": "opt", "type": ["null", "string"], "default": None},
        {"name": "opt_rev", "type": ["long", "null"]},
        {"name": "multi", "type": ["null", "int", "string", "Color", "Quad"]},
        {"name": "fx2", "type": "icefloe.test.Quad"},
        {
            "name": "nested",
            "type": {
                "type": "array",
                "items": {"type": "map", "values": {"type": "array", "items": "int"}},
            },
        },
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    ],
}

# Shaped like an Iceberg v2 manifest entry: field-id on every field, int-keyed maps written as
# arrays of key/value records with logicalType "map", a string-keyed map with key-id/value-id,
# element-id on lists, and an empty partition record.
MANIFEST = {
    "type": "record",
    "name": "manifest_entry",
    "fields": [
        {"name": "status", "type": "int", "field-id": 0},
        {"name": "snapshot_id", "type": ["null", "long"], "default": None, "field-id": 1},
        {"name": "sequence_number", "type": ["null", "long"], "default": None, "field-id": 3},
        {"name": "file_sequence_number", "type": ["null", "long"], "default": None, "field-id": 4},
        {
            "name": "data_file",
            "field-id": 2,
            "type": {
                "type": "record",
                "name": "r2",
                "fields": [
                    {"name": "content", "type": "int", "field-id": 134},
                    {"name": "file_path", "type": "string", "field-id": 100},
                    {"name": "file_format", "type": "string", "field-id": 101},
                    {
                        "name": "partition",
                        "field-id": 102,
                        "type": {
                            "type": "record",
                            "name": "r102",
                            "fields": [
                                {
                                    "name": "day",
                                    "type": ["null", {"type": "int", "logicalType": "date"}],
                                    "default": None,
                                    "field-id": 1000,
                                },
                            ],
                        },
                    },
                    {"name": "record_count", "type": "long", "field-id": 103},
                    {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
                    {
                        "name": "column_sizes",
                        "field-id": 108,
                        "default": None,
                        "type": [
                            "null",
                            {
                                "type": "array",
                                "logicalType": "map",
                                "items": {
                                    "type": "record",
                                    "name": "k117_v118",
                                    "fields": [
                                        {"name": "key", "type": "int", "field-id": 117},
                                        {"name": "value", "type": "long", "field-id": 118},
                                    ],
                                },
                            },
                        ],
                    },
                    {
                        "name": "lower_bounds",
                        "field-id": 125,
                        "default": None,
                        "type": [
                            "null",
                            {
                                "type": "array",
                                "logicalType": "map",
                                "items": {
                                    "type": "record",
                                    "name": "k126_v127",
                                    "fields": [
                                        {"name": "key", "type": "int", "field-id": 126},
                                        {"name": "value", "type": "bytes", "field-id": 127},
                                    ],
                                },
                            },
                        ],
                    },
                    {
                        "name": "properties",
                        "field-id": 200,
                        "type": {"type": "map", "values": "string", "key-id": 201, "value-id": 202},
                    },
                    {
                        "name": "split_offsets",
                        "field-id": 132,
                        "default": None,
                        "type": ["null", {"type": "array", "items": "long", "element-id": 133}],
                    },
                ],
            },
        },
    ],
}

ICEBERG_METADATA = {
    "schema": json.dumps({"type": "struct", "schema-id": 0, "fields": []}),
    "partition-spec": json.dumps(
        [{"source-id": 3, "field-id": 1000, "transform": "day", "name": "day"}]
    ),
    "partition-spec-id": "0",
    "format-version": "2",
    "content": "data",
}


def all_types_records(rng: random.Random, count: int) -> list[dict]:
    out = []
    for k in range(count):
        out.append(
            {
                "n": None,
                "b": k % 2 == 0,
                "i": [0, -1, 1, 2**31 - 1, -(2**31)][k % 5]
                if k < 5
                else rng.randint(-(2**31), 2**31 - 1),
                "l": [0, -1, 2**63 - 1, -(2**63), 64][k % 5]
                if k < 5
                else rng.randint(-(2**63), 2**63 - 1),
                "f": rng.randint(-4096, 4096) / 64.0,
                "d": rng.uniform(-1e12, 1e12),
                "s": ["", "héllo wörld", "x" * 200][k % 3]
                if k < 3
                else f"row-{k}-{rng.random():.6f}",
                "by": bytes(rng.randrange(256) for _ in range(k % 7)),
                "fx": bytes([k, k + 1, k + 2, 255 - k]),
                "e": ["RED", "GREEN", "BLUE"][k % 3],
                "point": {"x": float(k), "y": -k / 3.0},
                "points": [{"x": rng.random(), "y": rng.random()} for _ in range(k % 4)],
                "tags": {f"t{j}": rng.randint(-1000, 1000) for j in range(k % 3)},
                "opt": None if k % 3 == 0 else f"opt{k}",
                "opt_rev": None if k % 4 == 1 else k * 1000,
                "multi": [None, k, f"m{k}", "BLUE", b"\x00\x01\x02\x03"][k % 5],
                "fx2": b"abcd",
                "nested": [{f"k{j}": list(range(j)) for j in range(k % 3)} for _ in range(k % 3)],
                "ts": 1700000000000000 + k,
            }
        )
    return out


def manifest_records() -> list[dict]:
    out = []
    for k in range(6):
        out.append(
            {
                "status": k % 3,
                "snapshot_id": None if k == 0 else 1000 + k,
                "sequence_number": None if k % 2 else k,
                "file_sequence_number": None,
                "data_file": {
                    "content": 0,
                    "file_path": f"s3://bucket/table/data/day={k}/file-{k}.parquet",
                    "file_format": "PARQUET",
                    "partition": {"day": None if k == 5 else 19000 + k},
                    "record_count": 100 * (k + 1),
                    "file_size_in_bytes": 4096 * (k + 1),
                    "column_sizes": None
                    if k == 4
                    else [{"key": c, "value": 10 * c + k} for c in range(1, 4)],
                    "lower_bounds": [{"key": 1, "value": (k).to_bytes(8, "little")}],
                    "properties": {"writer": "fastavro", "k": str(k)},
                    "split_offsets": None if k % 2 else [4, 1024 * (k + 1)],
                },
            }
        )
    return out


def canonical(v):
    """The JSON form avro_test.cc's ToJson gives the same value."""
    if isinstance(v, (bytes, bytearray)):
        return {"$bytes": bytes(v).hex()}
    if isinstance(v, dict):
        return {k: canonical(x) for k, x in v.items()}
    if isinstance(v, list):
        return [canonical(x) for x in v]
    if isinstance(v, datetime.datetime):
        delta = v - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
        return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(v, datetime.date):
        return (v - datetime.date(1970, 1, 1)).days
    return v


def write_expected(path: str) -> None:
    with open(path, "rb") as fo:
        records = [canonical(r) for r in fastavro.reader(fo)]
    with open(path[: -len(".avro")] + ".json", "w") as out:
        out.write("[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n]\n")


def write_fastavro(name: str, schema: dict, records: list[dict], codec: str, **kwargs) -> None:
    path = os.path.join(HERE, name + ".avro")
    with open(path, "wb") as fo:
        fastavro.writer(
            fo, fastavro.parse_schema(schema), records, codec=codec, sync_marker=SYNC, **kwargs
        )
    write_expected(path)


def write_pyiceberg() -> None:
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    work = tempfile.mkdtemp(prefix="icefloe-avro-fixtures-")
    try:
        catalog = SqlCatalog(
            "fixtures", uri=f"sqlite:///{work}/catalog.db", warehouse=f"file://{work}"
        )
        catalog.create_namespace("ns")
        data = pa.table(
            {
                "id": pa.array([1, 2, 3], pa.int64()),
                "cat": pa.array(["a", "b", "a"]),
                "x": pa.array([1.5, None, 2.5]),
            }
        )
        table = catalog.create_table("ns.t", schema=data.schema)
        with table.update_spec() as update:
            update.add_identity("cat")
        table = catalog.load_table("ns.t")
        table.append(data)
        (manifest,) = glob.glob(f"{work}/**/metadata/*-m0.avro", recursive=True)
        (manifest_list,) = glob.glob(f"{work}/**/metadata/snap-*.avro", recursive=True)
        for src, name in [
            (manifest, "pyiceberg_manifest"),
            (manifest_list, "pyiceberg_manifest_list"),
        ]:
            dst = os.path.join(HERE, name + ".avro")
            shutil.copyfile(src, dst)
            write_expected(dst)
    finally:
        shutil.rmtree(work)


def main() -> None:
    records = all_types_records(random.Random(20240611), 30)
    for codec in ["null", "deflate", "snappy", "zstandard"]:
        # A small sync interval makes several blocks per file.
        write_fastavro(f"all_types_{codec}", ALL_TYPES, records, codec, sync_interval=512)
    write_fastavro(
        "iceberg_manifest", MANIFEST, manifest_records(), "deflate", metadata=ICEBERG_METADATA
    )
    write_pyiceberg()
    # The expected objects of the four all_types files are the same: keep one copy.
    for codec in ["deflate", "snappy", "zstandard"]:
        os.remove(os.path.join(HERE, f"all_types_{codec}.json"))
    os.replace(os.path.join(HERE, "all_types_null.json"), os.path.join(HERE, "all_types.json"))


if __name__ == "__main__":
    main()
