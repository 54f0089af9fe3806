"""EpochPlan: the epoch descriptor as one typed value (issue 44)."""

from __future__ import annotations

import dataclasses

import pytest

from icefloe import EpochPlan, _protocol


def test_the_plan_has_exactly_the_descriptors_fields():
    # Typed from the head's own field table: a field added there is added here.
    wire = set(_protocol.fields("epoch descriptor")) - {"dataset", "kind"}
    assert {f.name for f in dataclasses.fields(EpochPlan)} == wire


def test_a_plan_encodes_as_the_keywords_did():
    plan = EpochPlan(batch_size=8, seed=3, rank=1, world_size=2, columns=("a", "b"))
    assert plan.descriptor("ds") == _protocol.encode(
        "epoch descriptor", dataset="ds", batch_size=8, seed=3, rank=1, world_size=2,
        columns=["a", "b"])
    assert plan.replace(first_batch=4).first_batch == 4 and plan.first_batch is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.seed = 4  # type: ignore[misc]


def test_an_unknown_field_is_named():
    with pytest.raises(TypeError, match="epoch descriptor has no field 'sead'"):
        EpochPlan().replace(sead=1)
