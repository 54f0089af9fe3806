"""The piece format's shared vectors (cpp/icefloe/protocol/testdata/pieces.json).

protocol_test (C++) checks the nodes' encoder and ParsePiece with them; here
the Python client's reader must decode every valid one to the same fields and
refuse every invalid one with the same words, and the tests' own encoder
(piece_util.py) must write exactly the valid ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import piece_util
import pytest

import icefloe
from icefloe import _pieces

VECTORS = Path(__file__).resolve().parents[1] / "cpp/icefloe/protocol/testdata/pieces.json"
CASES = json.loads(VECTORS.read_text())["vectors"]
FLAGS = {"positions": _pieces.POSITIONS, "whole": _pieces.WHOLE, "span": _pieces.SPAN,
         "by_reference": _pieces.BY_REFERENCE}


@pytest.mark.parametrize("case", [c for c in CASES if c["error"] is None],
                         ids=lambda c: c["name"])
def test_valid_pieces_decode_to_their_fields(case):
    want = case["piece"]
    header = _pieces.read_header(bytes.fromhex(case["hex"]))
    assert header.flags == sum(FLAGS[f] for f in want["flags"])
    assert (header.batch, header.batch_size, header.count, header.last_size) == \
        (want["batch"], want["batch_size"], want["count"], want["last_size"])
    if header.runs is not None:
        assert header.runs.tolist() == want["runs"]
    else:
        assert want["runs"] == []
    positions = [] if header.positions is None else header.positions.tolist()
    assert positions == want["positions"]
    source = [] if header.source is None else \
        np.stack([header.source["start"], header.source["length"]], axis=1).tolist()
    assert source == want["source"]
    written = piece_util.encode(
        want["batch"], want["batch_size"], runs=[tuple(r) for r in want["runs"]],
        positions=want["positions"] if "positions" in want["flags"] else None,
        count=want["count"], last_size=want["last_size"], whole="whole" in want["flags"],
        source=[tuple(s) for s in want["source"]] if "by_reference" in want["flags"] else None)
    assert written.hex() == case["hex"]


@pytest.mark.parametrize("case", [c for c in CASES if c["error"] is not None],
                         ids=lambda c: c["name"])
def test_invalid_pieces_are_refused_with_the_servers_words(case):
    with pytest.raises(icefloe.InvalidArgument) as err:
        _pieces.read_header(bytes.fromhex(case["hex"]))
    assert str(err.value).endswith(f"malformed piece metadata: {case['error']}")


def test_the_vectors_cover_every_error_and_flag():
    errors = {c["error"] for c in CASES if c["error"] is not None}
    assert errors == set(icefloe._protocol.constants()["piece"]["errors"].values())
    flags = {f for c in CASES if c["error"] is None for f in c["piece"]["flags"]}
    assert flags == set(FLAGS)
