"""The head's status page (GET / on its HTTP port), rendered by a real
browser: headless Chromium loads it from a running local cluster with a
dataset and a job reading it, and the rendered text must show them. The
screenshot is kept under build/test-artifacts/ (and pytest's tmp dir).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest
from iceberg_util import Warehouse

import icefloe
from icefloe import _stall

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "build" / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
ROWS = 5_000


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium with a throwaway profile; bounded in time."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--no-first-run", "--disable-extensions", "--disable-background-networking",
           f"--user-data-dir={tmp_path / 'profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def visible_text(dom: str) -> str:
    """The text a reader sees: tags dropped, entities decoded, spaces squeezed."""
    body = dom.split("<body", 1)[1]
    text = re.sub(r"<[^>]+>", " ", body)
    for entity, char in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&#39;", "'"),
                         ("&middot;", "·"), ("&amp;", "&")):
        text = text.replace(entity, char)
    return re.sub(r"\s+", " ", text)


@pytest.fixture()
def running(tmp_path):
    """A cluster with dataset 'clicks' and job 'page-job' reading it (in a
    thread, slowly, until the test ends)."""
    data = pa.table({"id": pa.array(range(ROWS), pa.int64()),
                     "label": pa.array([i % 3 for i in range(ROWS)], pa.int32())})
    table = Warehouse(tmp_path / "wh").create("clicks", data)
    with icefloe.LocalCluster(num_nodes=2, memory_limit="256MiB",
                              log_dir=tmp_path / "logs") as cluster, cluster.client() as c:
        c.load("clicks", table.metadata_location)
        stop = threading.Event()
        first = threading.Event()

        def read():
            while not stop.is_set():
                for _ in c.iter_epoch("clicks", batch_size=100, job="page-job", shuffle="none"):
                    first.set()
                    if stop.wait(0.01):
                        break

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            # The job shows once its first report arrived (an epoch is 50
            # batches of ~10 ms: it ends, and reports, within a second or two).
            deadline = time.monotonic() + 60
            while "page-job" not in {j["job"] for j in c.status()["jobs"]}:
                assert time.monotonic() < deadline, "the reader never reported"
                time.sleep(0.1)
            yield cluster
        finally:
            stop.set()
            reader.join(timeout=60)
            _stall.flush_all(timeout_s=10)


def test_page_is_served_as_html(running):
    with urllib.request.urlopen(running.head.health + "/", timeout=30) as r:
        assert r.headers["Content-Type"].startswith("text/html")
        html = r.read().decode()
    assert '<meta http-equiv="refresh"' in html
    assert "<script" not in html and "http://" not in html.split("</head>")[0]


@needs_chromium
def test_browser_renders_datasets_nodes_jobs_and_loads(running, tmp_path):
    url = running.head.health + "/"
    dom = chromium(tmp_path, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = visible_text(dom.stdout)
    assert "icefloe" in text and "Head ready" in text, text
    # Datasets: name, state, exact row count, slices per node.
    assert re.search(r"Datasets dataset state rows bytes slices per node clicks ready 5,000 ",
                     text), text
    with running.client() as c:
        slices = c.describe("clicks")["slices"]
    holders = sorted({n for s in slices for n in s["nodes"]})
    for node in holders:
        count = sum(node in s["nodes"] for s in slices)
        assert f"{node}: {count} " in text, (node, text)
    for node in running.node_uris:
        # Nodes: liveness and memory left of the 256 MiB budget.
        assert re.search(re.escape(node) + r" alive [\d.]+ s ago .* of 256\.0 MiB \(", text), text
    # Jobs reading now: each source's rows so far, rows/s and the stall share.
    m = re.search(r"page-job clicks: [\d,]+ rows, [\d,]+ rows/s (\d+) ([\d,]+) ([\d.]+) % "
                  r"rank 0: ", text)
    assert m, text
    assert int(m.group(1)) >= 1 and int(m.group(2).replace(",", "")) > 0
    assert 0 <= float(m.group(3)) <= 100
    # ... and which nodes serve it.
    assert re.search(r"rank 0: [\d.]+ % " + re.escape(holders[0]), text), text
    # Loads: the finished load of clicks.
    assert re.search(r"Loads .* clicks ready done \d+ s ago 5,000 ", text), text

    shot = tmp_path / "status-page.png"
    out = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,900",
                   "--hide-scrollbars", url)
    assert out.returncode == 0, out.stderr[-2000:]
    png = shot.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, ARTIFACTS / "status-page.png")
