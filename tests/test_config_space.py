"""ConfigSpace: round trips, strict parsing, idempotent projection, schema -> parse."""

from __future__ import annotations

import json
import math

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxenv import ConfigError
from jaxenv.mapf import make_config_space

SPACE = make_config_space(max_size=10, max_agents=5)
EDITABLE = SPACE.editable_names()

junk = st.one_of(st.none(), st.booleans(), st.text(max_size=3),
                 st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5))


def _knob_value(name: str):
    k = SPACE[name]
    if k.is_vector:
        vals = st.floats(-2, 3, allow_nan=False)
        return st.one_of(
            st.lists(vals, min_size=len(k.keys), max_size=len(k.keys)),
            st.dictionaries(st.sampled_from(list(k.keys) + ["99"]), st.one_of(vals, junk)),
            junk)
    if k.kind == "choice":
        return st.one_of(st.sampled_from(list(k.choices)), junk)
    return st.one_of(st.floats(-5, 5, allow_nan=False), junk)


edits = st.dictionaries(st.sampled_from(list(SPACE.names) + ["bogus"]), st.none(), max_size=6) \
    .flatmap(lambda d: st.fixed_dictionaries({k: _knob_value(k) if k in SPACE.names else junk
                                              for k in d}))


def _close(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)
    return a == b


@settings(max_examples=150, deadline=None)
@given(edits)
def test_project_gives_valid_config_and_is_idempotent(edit):
    values, adjustments = SPACE.project(edit)
    SPACE.validate(values)  # raises if invalid
    again, adj2 = SPACE.project(values, editable_only=False)
    assert adj2 == [] and _close(again, values)
    # Every field that changed from the default without being asked for is reported.
    for name in set(edit) - set(SPACE.names):
        assert any(a.field == name for a in adjustments)


@settings(max_examples=60, deadline=None)
@given(edits)
def test_config_round_trip(edit):
    values, _ = SPACE.project(edit)
    assert _close(SPACE.from_config(SPACE.to_config(values)), values)


def test_parse_names_the_bad_field():
    with pytest.raises(ConfigError) as e:
        SPACE.parse({"hole_ratio": {"7": 0.9}})
    assert e.value.field == "hole_ratio.7"
    with pytest.raises(ConfigError) as e:
        SPACE.parse('{"slip_prob": "high"}')
    assert e.value.field == "slip_prob"
    with pytest.raises(ConfigError) as e:
        SPACE.parse('{"bogus": 1}')
    assert e.value.field == "bogus"
    with pytest.raises(ConfigError) as e:
        SPACE.parse('{"success_reward": 2.0}')  # reward knobs are not editable
    assert e.value.field == "success_reward"
    with pytest.raises(ConfigError) as e:
        SPACE.parse("{not json")
    assert e.value.field == "<edit>"
    with pytest.raises(ConfigError) as e:
        SPACE.parse({"size_weights": [0.5] * 8})  # a simplex must sum to one
    assert e.value.field == "size_weights"


def test_project_reports_adjustments():
    values, adj = SPACE.project({"size_weights": {"3": 2.0, "4": 2.0}, "slip_prob": 0.9,
                                 "success_reward": 5.0, "bogus": 1})
    assert math.isclose(sum(values["size_weights"]), 1.0)
    assert values["slip_prob"] == 0.5
    assert values["success_reward"] == SPACE["success_reward"].default
    reasons = {a.field: a.reason for a in adj}
    assert reasons["size_weights.3"] == "clipped to bounds"
    assert reasons["size_weights"] == "renormalised to sum to 1"
    assert reasons["slip_prob"] == "clipped to bounds"
    assert reasons["success_reward"] == "not editable"
    assert reasons["bogus"] == "unknown field"


def test_schema_covers_only_editable_knobs_with_enums():
    schema = SPACE.json_schema()
    assert set(schema["properties"]) == set(EDITABLE)
    assert schema["additionalProperties"] is False
    hole = schema["properties"]["hole_ratio"]["properties"]["10"]
    assert min(hole["enum"]) == 0.0 and max(hole["enum"]) == 0.6
    assert "minimum" not in json.dumps(schema)


def test_every_string_the_grammar_admits_parses_in_bounds():
    """Strings sampled from the regex outlines compiles the schema into parse cleanly."""
    outlines_core = pytest.importorskip("outlines_core")
    from hypothesis import find  # noqa: F401  (hypothesis must be importable)

    regex = outlines_core.json_schema.build_regex_from_schema(json.dumps(SPACE.json_schema()))

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_regex(regex, fullmatch=True))
    def check(text):
        try:
            edit = json.loads(text)
        except json.JSONDecodeError:
            return  # the regex admits a few whitespace forms json rejects; none parse wrongly
        values, adj = SPACE.project(edit)
        # In-bounds by construction: the only adjustment the grammar allows is renormalising.
        assert all(a.reason == "renormalised to sum to 1" or a.reason.startswith("all weights")
                   for a in adj), adj
        SPACE.validate(values)
        for name, val in edit.items():
            k = SPACE[name]
            if k.kind in ("float", "int") and not k.is_vector:
                SPACE.parse({name: val})  # strict parse accepts every scalar the grammar admits
            elif k.kind == "float":
                SPACE.parse({name: val})

    check()


def test_stack_batches_configs():
    a = SPACE.default()
    b = dict(a, slip_prob=0.25)
    batch = SPACE.stack([a, b, a])
    assert batch.slip_prob.shape == (3,)
    assert batch.size_weights.shape == (3, 8)
    np.testing.assert_allclose(batch.slip_prob, [0.0, 0.25, 0.0])
    one = jax.tree.map(lambda x: x[1], batch)
    assert SPACE.from_config(one)["slip_prob"] == 0.25
    assert SPACE.batch(None, 4).hole_ratio.shape == (4, 8)


def test_describe_lists_every_knob_with_range():
    text = SPACE.describe()
    for k in SPACE.knobs:
        assert k.name in text
    assert "not editable" in text
