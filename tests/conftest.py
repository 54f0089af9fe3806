"""Shared fixtures: generated Parquet files and running servers."""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest


@pytest.fixture(scope="session", autouse=True)
def _codes_dir(tmp_path_factory):
    """The host's shared row length codes (``_codes_file.host_codes``)
    go to this run's temporary directory, not /dev/shm, and go with it."""
    before = os.environ.get("ICEFLOE_CODES_DIR")
    os.environ["ICEFLOE_CODES_DIR"] = str(tmp_path_factory.mktemp("codes"))
    yield
    if before is None:
        os.environ.pop("ICEFLOE_CODES_DIR", None)
    else:
        os.environ["ICEFLOE_CODES_DIR"] = before


@pytest.fixture(scope="session")
def small_parquet(tmp_path_factory) -> tuple[str, pa.Table]:
    """A 50,000-row Parquet file with several row groups and mixed types."""
    rows = 50_000
    rng = np.random.default_rng(1234)
    table = pa.table(
        {
            "id": np.arange(rows, dtype=np.int64),
            "x": rng.standard_normal(rows),
            "label": rng.integers(0, 10, rows, dtype=np.int32),
            "name": pa.array([f"row-{i}" if i % 7 else None for i in range(rows)]),
        }
    )
    path = tmp_path_factory.mktemp("parquet") / "small.parquet"
    pq.write_table(table, path, row_group_size=12_000)
    return str(path), table


@pytest.fixture(scope="session")
def s3_server():
    """A real S3 endpoint on loopback (moto's server mode) with bucket 'warehouse'.

    Yields the environment a process needs to reach it (endpoint, region,
    dummy credentials); the server stops at the end of the session.
    """
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                 aws_access_key_id="testing", aws_secret_access_key="testing").create_bucket(
        Bucket="warehouse")
    try:
        yield {"endpoint": endpoint, "env": env}
    finally:
        server.stop()
