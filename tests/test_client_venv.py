"""The client installs beside a training image's own pyarrow (issue 28, item 6).

The icefloe wheel (client) asks only for pyarrow >= 19; the icefloe-server wheel
carries the Arrow C++ its executables were built with. For each pyarrow a
training image might pin, a venv of its own gets that pyarrow, numpy and the
two wheels from build/wheels (./dev.sh setup makes them) and nothing else;
there a LocalCluster loads an Iceberg table and the client reads epochs, a
resume and a take, over shared memory and over TCP
(tests/client_venv_reader.py). Every read must equal what this process's
client (pyarrow 26) reads from a cluster of its own, and the source rows.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import client_venv_reader as reader
import numpy as np
import pyarrow as pa
import pytest
from iceberg_util import Warehouse

from icefloe._bin import bin_path

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / "build" / "wheels"
VENVS = ROOT / "build" / "client-venvs"
READER = Path(reader.__file__)

N = 2000


def _data() -> pa.Table:
    rng = np.random.default_rng(5)
    ids = np.arange(N, dtype=np.int64)
    return pa.table({
        "id": ids,
        "x": rng.standard_normal(N).astype(np.float32),
        "name": pa.array([f"row-{i}" * (1 + i % 3) for i in range(N)]),
        "flag": pa.array([None if i % 7 == 0 else i % 2 == 0 for i in range(N)]),
        "tags": pa.array([list(range(i % 4)) for i in range(N)], pa.list_(pa.int32())),
        "ts": pa.array(ids * 1_000_000, pa.timestamp("us")),
    })


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    wh = Warehouse(tmp_path_factory.mktemp("client-venv") / "wh")
    data = _data()
    t = wh.create("t", data.slice(0, N // 2))
    t.append(data.slice(N // 2))
    return t.metadata_location, data


def _pip(python: Path, *args: str) -> None:
    run = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                          *args], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"pip install {' '.join(args)} failed:\n{run.stdout}{run.stderr}"


def _venv(version: str) -> Path:
    """A venv with pyarrow==version, numpy and the two wheels (kept under
    build/client-venvs between runs; the wheels are reinstalled each time)."""
    wheels = sorted(WHEELS.glob("icefloe*.whl"))
    names = sorted(w.name.split("-")[0] for w in wheels)
    assert names == ["icefloe", "icefloe_server"], \
        f"{WHEELS} must hold the icefloe and icefloe-server wheels (./dev.sh setup): {names}"
    venv = VENVS / f"pyarrow-{version}"
    python = venv / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import numpy, pyarrow; print(pyarrow.__version__)"],
                           capture_output=True, text=True) if python.exists() else None
    if probe is None or probe.returncode != 0 or probe.stdout.strip() != version:
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        _pip(python, f"pyarrow=={version}", "numpy")
    _pip(python, "--no-deps", "--force-reinstall", *map(str, wheels))
    return python


def _read_all(out: Path, name: str) -> pa.Table:
    with pa.memory_map(str(out / f"{name}.arrow")) as f:
        return pa.ipc.open_file(f).read_all()


@pytest.fixture(scope="module")
def reference(table, tmp_path_factory):
    """What this process's client (the dev venv's pyarrow 26) reads."""
    out = tmp_path_factory.mktemp("reference")
    reader.main(table[0], out)
    return out


def test_wheels_keep_the_servers_arrow_out_of_the_client():
    """The client wheel has no executables and links no Arrow; the server
    wheel's executables resolve every Arrow library inside the wheel."""
    import zipfile

    client = next(WHEELS.glob("icefloe-*.whl"))
    server = next(WHEELS.glob("icefloe_server-*.whl"))
    client_files = zipfile.ZipFile(client).namelist()
    assert not [f for f in client_files if "/bin/" in f or "libarrow" in f], client_files
    meta = zipfile.ZipFile(client).read(next(f for f in client_files if f.endswith("METADATA")))
    requires = [line for line in meta.decode().splitlines() if line.startswith("Requires-Dist")]
    assert "Requires-Dist: pyarrow>=19" in requires, requires
    server_files = zipfile.ZipFile(server).namelist()
    meta = zipfile.ZipFile(server).read(next(f for f in server_files if f.endswith("METADATA")))
    assert "Requires-Dist: pyarrow" not in meta.decode()
    for name in ("icefloe-head", "icefloe-node"):
        assert f"icefloe_server/bin/{name}" in server_files
        # The installed executables (this venv's server wheel) load only the bundled Arrow.
        exe = Path(bin_path(name))
        ldd = subprocess.run(["ldd", str(exe)], capture_output=True, text=True, check=True).stdout
        arrow = [line.split() for line in ldd.splitlines() if "arrow" in line or "parquet" in line]
        assert any(fields[0].startswith("libarrow.so.") for fields in arrow), ldd
        for fields in arrow:
            assert Path(fields[2]).resolve().parent == exe.resolve().parent.parent / "lib", ldd


@pytest.mark.parametrize("version", ["19.0.0", "26.0.1"])
def test_client_in_its_own_venv_reads_exactly(version, table, reference, tmp_path):
    python = _venv(version)
    out = tmp_path / "out"
    out.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "ICEFLOE_BIN_DIR", "VIRTUAL_ENV", "PYTHONHOME")}
    run = subprocess.run([str(python), str(READER), table[0], str(out)], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    report = json.loads((out / "report.json").read_text())
    assert report["pyarrow"] == version
    assert Path(report["icefloe"]).is_relative_to(python.parent.parent), report["icefloe"]
    want = json.loads((reference / "report.json").read_text())
    assert report["reads"] == want["reads"]  # the same batches, of the same sizes
    data = table[1]
    for name in want["reads"]:
        got = _read_all(out, name)
        assert got.equals(_read_all(reference, name)), name
        # Every row is the source's row with that id.
        source = data.take(pa.array(got.column("id").to_numpy()))
        assert got.select(data.column_names).equals(source.cast(got.schema)), name
    for path in ("shared", "tcp"):
        ids = np.concatenate([_read_all(out, f"{path}-epoch-{r}").column("id").to_numpy()
                              for r in range(reader.PLAN["world_size"])])
        assert set(ids.tolist()) == set(range(N))
        epoch = _read_all(out, f"{path}-epoch-0").column("id").to_numpy()
        skip = reader.RESUME_STEPS * reader.BATCH
        resumed = _read_all(out, f"{path}-resume-0").column("id").to_numpy()
        np.testing.assert_array_equal(resumed, epoch[skip:])
        taken = _read_all(out, f"{path}-take").column("id").to_numpy()
        assert taken.tolist() == reader.TAKE


def test_without_the_server_wheel_the_error_says_how_to_get_it(monkeypatch, tmp_path):
    """A client-only install (no icefloe-server) asked for a server names the
    wheel to install; ICEFLOE_BIN_DIR still wins when it holds the executable."""
    monkeypatch.delenv("ICEFLOE_BIN_DIR", raising=False)
    monkeypatch.setitem(sys.modules, "icefloe_server", None)  # import fails
    with pytest.raises(FileNotFoundError, match=r"icefloe-node not found: .*icefloe\[server\]"):
        bin_path("icefloe-node")
    with pytest.raises(FileNotFoundError, match="looked in"):
        monkeypatch.setenv("ICEFLOE_BIN_DIR", str(tmp_path))
        bin_path("icefloe-node")
    exe = tmp_path / "icefloe-node"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert bin_path("icefloe-node") == str(exe)
