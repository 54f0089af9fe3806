"""Where the review demo keeps its tokenizer files: beside the table (in the
loopback S3 server's warehouse bucket, or on local disk), written once by
the demo and read by the nodes and by the baselines' DataLoader workers."""

from __future__ import annotations

from pathlib import Path

MODEL_DIR = "demo/models"  # in the warehouse bucket, beside the table


def is_tokenizer_json(model: bytes) -> bool:
    """As the nodes tell them apart: a tokenizer.json is a JSON object."""
    return model.lstrip()[:1] == b"{"


def store_model(model: bytes, root: Path, s3: dict | None, name: str | None = None) -> str:
    """Puts the model beside the table (as ``name``, by default after its
    kind): its location, as nodes and workers read it."""
    name = name or ("tokenizer.json" if is_tokenizer_json(model) else "reviews-spm.model")
    if s3:
        import boto3

        boto3.client("s3", endpoint_url=s3["endpoint"], region_name="us-east-1",
                     aws_access_key_id="testing", aws_secret_access_key="testing").put_object(
            Bucket="warehouse", Key=f"{MODEL_DIR}/{name}", Body=model)
        return f"s3://warehouse/{MODEL_DIR}/{name}"
    path = root / "models" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model)
    return str(path)


def read_model(location: str, s3: dict | None) -> bytes:
    """The bytes of a model that store_model put at ``location``."""
    if location.startswith("s3://"):
        import pyarrow.fs

        fs = pyarrow.fs.S3FileSystem(endpoint_override=s3["endpoint"], scheme="http",
                                     access_key="testing", secret_key="testing",
                                     region="us-east-1")
        with fs.open_input_stream(location[len("s3://"):]) as f:
            return f.read()
    return Path(location).read_bytes()
