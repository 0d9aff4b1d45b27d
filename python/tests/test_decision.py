"""Decisions: every field through model_dump / model_validate, and hostile input."""

import json
import math

import pytest

import decision_store as ds


def full(plan, parent=None, sequence=1):
    """A decision with every field filled, as a dict in the interchange format."""
    return {
        "decision_id": ds.new_decision_id(),
        "plan_id": plan,
        "parent_decision_id": parent,
        "sequence": sequence,
        "decision_type": "strategy_choice",
        "chosen_option": "token bucket per API key ✓ '; DROP TABLE decisions; --",
        "rationale": "keys, not users\nsecond line",
        "confidence_score": 0.8125,
        "alternatives": [{"option": "fixed window", "rationale": "bursts"}, {"option": "none", "rationale": None}],
        "context_snapshot": {
            "hash": "sha256:abc",
            "resources": [{"resource_id": "class://TokenBucket", "resource_type": "class", "version": "v1"}],
            "actor_state_ref": "actor:1",
        },
        "artifacts_produced": [{"artifact_path": "src/rl.py", "content_hash": "sha256:def"}],
        "is_correction": False,
        "corrects_decision_id": None,
        "superseded_by": None,
        "downstream_decision_ids": [ds.new_decision_id()],
        "downstream_plan_ids": [ds.new_plan_id()],
        "metadata": {"n": 1, "big": 2**63 - 1, "f": 1.5, "nested": {"list": [True, None, "x"]}},
    }


def test_every_field_round_trips_through_model_dump_and_model_validate():
    plan = ds.new_plan_id()
    root = ds.Decision.create(plan, "prompt_definition", 0, chosen_option="root")
    data = full(plan, parent=root.decision_id)
    d = ds.Decision.model_validate(data)
    assert d.model_dump() == data
    assert ds.Decision.model_validate(d.model_dump()) == d
    assert ds.Decision.model_validate_json(d.model_dump_json()) == d
    assert json.loads(d.model_dump_json()) == data
    # Properties for every field.
    for field, value in data.items():
        assert getattr(d, field) == value, field
    assert d.phase == "strategize"


def test_decisions_are_immutable_and_hashable():
    d = ds.Decision.create(ds.new_plan_id(), "prompt_definition", 0)
    with pytest.raises(AttributeError):
        d.chosen_option = "changed"
    assert len({d, ds.Decision.model_validate(d.model_dump())}) == 1


def test_create_generates_monotonic_ids():
    plan = ds.new_plan_id()
    ids = [ds.Decision.create(plan, "tool_invocation", i).decision_id for i in range(50)]
    assert ids == sorted(ids) and len(set(ids)) == 50


@pytest.mark.parametrize(
    "change, field",
    [
        ({"decision_id": "not-a-ulid"}, "decision_id"),
        ({"confidence_score": 1.5}, "confidence_score"),
        ({"confidence_score": math.nan}, "confidence_score"),
        ({"confidence_score": math.inf}, "confidence_score"),
        ({"confidence_score": "high"}, "confidence_score"),
        ({"sequence": -1}, "sequence"),
        ({"sequence": 2**70}, "sequence"),
        ({"metadata": {"x": 2**70}}, "metadata.x"),
        ({"metadata": {"x": object()}}, "metadata.x"),
        ({"decision_type": "guess"}, "decision_type"),
        ({"unknown_field": 1}, "unknown_field"),
        ({"alternatives": "a string"}, "alternatives"),
        ({"alternatives": [{"option": "a"}, {"option": 3}]}, "alternatives[1].option"),
        (
            {"context_snapshot": {"hash": "", "resources": [{"resource_id": None}], "actor_state_ref": None}},
            "context_snapshot.resources[0].resource_id",
        ),
    ],
)
def test_invalid_input_raises_a_validation_error_naming_the_field(change, field):
    data = full(ds.new_plan_id(), sequence=0)
    data["parent_decision_id"] = None
    data.update(change)
    with pytest.raises(ds.ValidationError) as info:
        ds.Decision.model_validate(data)
    assert field in str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, ds.DecisionStoreError)


def test_missing_decision_id_and_wrong_shapes():
    with pytest.raises(ds.ValidationError, match="decision_id"):
        ds.Decision.model_validate({"plan_id": ds.new_plan_id(), "decision_type": "tool_invocation", "sequence": 0})
    for bad in [None, 3, "text", [1, 2]]:
        with pytest.raises(ds.ValidationError):
            ds.Decision.model_validate(bad)
    with pytest.raises(ds.ValidationError):
        ds.Decision.model_validate_json("{not json")
    with pytest.raises(ds.ValidationError, match="decision_id"):
        ds.Decision.create(ds.new_plan_id(), "tool_invocation", 0, decision_id=ds.new_decision_id())


def test_tuples_read_as_lists_and_other_iterables_are_refused():
    plan = ds.new_plan_id()
    root = ds.Decision.create(plan, "prompt_definition", 0, chosen_option="root")
    data = full(plan, parent=root.decision_id)
    as_tuples = dict(data, alternatives=tuple(data["alternatives"]), downstream_plan_ids=tuple(data["downstream_plan_ids"]))
    assert ds.Decision.model_validate(as_tuples) == ds.Decision.model_validate(data)
    for not_a_list in [iter(data["alternatives"]), {"option": "x"}.keys(), range(2)]:
        with pytest.raises(ds.ValidationError, match="alternatives"):
            ds.Decision.model_validate(dict(data, alternatives=not_a_list))
