"""The piece format's shared vectors (cpp/icefloe/protocol/testdata/pieces.json).

protocol_test (C++) checks the nodes' encoder and ParsePiece with them; here
the client library, through ctypes, must decode every valid one to the same
fields, the client's merge must refuse every invalid one with the same words,
and the tests' own encoder (piece_util.py) must write exactly the valid ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import piece_util
import pyarrow as pa
import pytest

import icefloe

VECTORS = Path(__file__).resolve().parents[1] / "cpp/icefloe/protocol/testdata/pieces.json"
CASES = json.loads(VECTORS.read_text())["vectors"]
FLAGS = {"positions": piece_util.POSITIONS, "whole": piece_util.WHOLE,
         "span": piece_util.SPAN, "by_reference": piece_util.BY_REFERENCE}


@pytest.mark.parametrize("case", [c for c in CASES if c["error"] is None],
                         ids=lambda c: c["name"])
def test_valid_pieces_decode_to_their_fields(case):
    want = case["piece"]
    header = piece_util.decode(bytes.fromhex(case["hex"]))
    assert header.flags == sum(FLAGS[f] for f in want["flags"])
    assert (header.batch, header.batch_size, header.count, header.last_size) == \
        (want["batch"], want["batch_size"], want["count"], want["last_size"])
    assert (header.runs or []) == want["runs"]
    assert (header.positions or []) == want["positions"]
    assert (header.source or []) == want["source"]
    written = piece_util.encode(
        want["batch"], want["batch_size"], runs=[tuple(r) for r in want["runs"]],
        positions=want["positions"] if "positions" in want["flags"] else None,
        count=want["count"], last_size=want["last_size"], whole="whole" in want["flags"],
        source=[tuple(s) for s in want["source"]] if "by_reference" in want["flags"] else None)
    assert written.hex() == case["hex"]


@pytest.mark.parametrize("case", [c for c in CASES if c["error"] is not None],
                         ids=lambda c: c["name"])
def test_invalid_pieces_are_refused_with_the_servers_words(case):
    nothing = pa.record_batch({"id": pa.array([], pa.int64())})
    with pytest.raises(icefloe.InvalidArgument) as err:
        piece_util.merged((nothing, bytes.fromhex(case["hex"])))
    assert str(err.value) == f"a node sent malformed piece metadata: {case['error']}"


def test_the_vectors_cover_every_error_and_flag():
    errors = {c["error"] for c in CASES if c["error"] is not None}
    assert errors == set(icefloe._protocol.constants()["piece"]["errors"].values())
    flags = {f for c in CASES if c["error"] is None for f in c["piece"]["flags"]}
    assert flags == set(FLAGS)
