"""ConfigSpace: round trips, strict parsing, idempotent projection, schema -> parse, and the
adversarial inputs that used to crash parse/project (each must end in a ConfigError or a
recorded adjustment, in bounded time)."""

from __future__ import annotations

import json
import math
import re
import time

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from designer.engineer.edits import apply_edit, edit_schema, preset_space
from jaxenv import ConfigError
from jaxenv.mapf import make_config_space
from jaxenv.replies import MAX_JSON_CHARS, MAX_JSON_DEPTH, loads_bounded

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


def _grammar(schema: dict) -> str:
    outlines_core = pytest.importorskip("outlines_core")
    return outlines_core.json_schema.build_regex_from_schema(json.dumps(schema))


def test_every_string_the_grammar_admits_parses_in_bounds():
    """Strings sampled from the regex outlines compiles the schema into parse strictly."""
    regex = _grammar(SPACE.json_schema())

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_regex(regex, fullmatch=True))
    def check(text):
        adj = []
        values = SPACE.parse(text, adjustments=adj)  # strict: raises on anything out of grid
        assert all(a.reason == "renormalised to sum to 1" for a in adj), adj
        projected, padj = SPACE.project(text)
        assert _close(projected, values)
        assert all(a.reason == "renormalised to sum to 1" for a in padj), padj

    check()


@pytest.mark.parametrize("preset", ["paper", "open"])
def test_every_reply_the_edit_grammar_admits_applies(preset):
    """The reply grammar (knobs + rationale) of both presets: every sampled string applies to
    an in-bounds config through the strict path, from the default and from a random base."""
    space = preset_space(SPACE, preset)
    regex = _grammar(edit_schema(space))
    rng = np.random.default_rng(0)
    bases = [space.default()]
    for _ in range(3):  # random in-bounds bases, fixed knobs as the preset holds them
        b = space.default()
        for name in ("size_weights", "agent_weights"):
            if space[name].editable:
                b[name] = [float(x) for x in rng.dirichlet(np.ones(len(b[name])) * 0.3)]
        b["hole_ratio"] = [float(x) for x in rng.choice(space["hole_ratio"].grid(), 8)]
        bases.append(space.validate(b))
    seen = {"n": 0, "named": set()}

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_regex(regex, fullmatch=True), st.integers(0, len(bases) - 1))
    def check(text, i):
        out = apply_edit(space, text, bases[i], constrained=True)
        assert out.rejection is None, (text, out.rejection)
        space.validate(out.values)
        assert all(a.field == "rationale" or a.reason == "renormalised to sum to 1"
                   for a in out.adjustments), out.adjustments
        for k in space.knobs:
            if not k.editable:
                assert _close(out.values[k.name], bases[i][k.name])
        json.dumps(out.to_dict(), allow_nan=False)
        seen["n"] += 1
        seen["named"] |= set(json.loads(text)) - {"rationale"}

    check()
    assert seen["n"] >= 250
    assert seen["named"] == set(space.editable_names())  # the sample reached every knob


def test_grammar_cannot_write_an_all_zero_simplex():
    """A simplex edit must name some positive weight, so no base can be zeroed out."""
    regex = re.compile(_grammar(SPACE.json_schema()))
    zeros = ", ".join(f'"{k}": 0.0' for k in SPACE["size_weights"].keys)
    assert not regex.fullmatch('{"size_weights": {"3": 0.0}}')
    assert not regex.fullmatch('{"size_weights": {' + zeros + '}}')
    assert not regex.fullmatch('{"size_weights": {}}')
    assert regex.fullmatch('{"size_weights": {"3": 0.0, "7": 0.05}}')
    assert regex.fullmatch('{"size_weights": {"10": 1.0}}')
    assert regex.fullmatch('{"hole_ratio": {"3": 0.0}}')  # only simplices need a positive


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


# ----------------------------------------------------------------- simplex edits, presets

def test_partial_simplex_edit_is_renormalised_and_reported():
    adj = []
    values = SPACE.parse({"size_weights": {"3": 0.0}}, adjustments=adj)  # the grammar admits it
    w = values["size_weights"]
    assert w[0] == 0.0 and math.isclose(sum(w), 1.0) and math.isclose(w[1], 1 / 7)
    assert [(a.field, a.reason) for a in adj] == [("size_weights", "renormalised to sum to 1")]
    assert SPACE.parse('{"size_weights": {"3": 0.0}}') == values  # same without the list
    # A full, normalised object needs no adjustment; a full list must already sum to one.
    adj = []
    SPACE.parse({"size_weights": {k: 0.125 for k in SPACE["size_weights"].keys}},
                adjustments=adj)
    assert adj == []


def test_all_zero_simplex_is_an_error_in_parse_and_a_fallback_in_project():
    zeros = {k: 0.0 for k in SPACE["size_weights"].keys}
    with pytest.raises(ConfigError) as e:
        SPACE.parse({"size_weights": zeros})
    assert e.value.field == "size_weights" and "zero" in e.value.message
    one_size = dict(SPACE.default(), size_weights=[1.0] + [0.0] * 7)
    with pytest.raises(ConfigError):  # zero only given this base
        SPACE.parse({"size_weights": {"3": 0.0}}, one_size)
    values, adj = SPACE.project({"size_weights": {"3": 0.0}}, one_size)
    assert values["size_weights"] == one_size["size_weights"]
    assert [a.reason for a in adj] == ["all weights zero; kept previous weights"]


def test_with_editable_narrows_and_pins():
    space = SPACE.with_editable(["slip_prob"], pin={"agent_weights": [0, 0, 1, 0, 0]})
    assert space.editable_names() == ("slip_prob",)
    assert space.default()["agent_weights"] == [0, 0, 1, 0, 0]
    assert "fixed by the preset" in space.describe()
    with pytest.raises(ConfigError) as e:  # validate refuses another value of a pinned knob
        space.validate(SPACE.default())
    assert e.value.field == "agent_weights"
    values, adj = space.project(SPACE.default(), None, False)
    assert values["agent_weights"] == [0, 0, 1, 0, 0]
    assert [(a.field, a.reason) for a in adj] == [("agent_weights", "fixed by the preset")]
    values, adj = space.project({"slip_prob": 0.1}, SPACE.default())
    assert values["agent_weights"] == [0, 0, 1, 0, 0] and values["slip_prob"] == 0.1
    assert [a.reason for a in adj] == ["base config: fixed by the preset"]
    with pytest.raises(ValueError, match="no preset may open"):
        SPACE.with_editable(["success_reward"])  # reward knobs stay fixed in every preset
    with pytest.raises(ValueError, match="both editable and pinned"):
        SPACE.with_editable(["slip_prob"], pin={"slip_prob": 0.1})
    with pytest.raises(ValueError, match="unknown"):
        SPACE.with_editable(["bogus"])
    with pytest.raises(ConfigError):  # a pin must be a valid value
        SPACE.with_editable([], pin={"agent_weights": [1, 1, 0, 0, 0]})
    assert SPACE.stack([space.default(), SPACE.default()]).agent_weights.shape == (2, 5)


# -------------------------------------------------------------------- adversarial inputs

HUGE = 10**400  # beyond float range: float() raises OverflowError
DIGITS_5000 = "1" + "0" * 4999  # beyond int(): ValueError above 4,300 digits


def _deep_dict(depth: int) -> dict:
    d: dict = {}
    for _ in range(depth):
        d = {"x": d}
    return d


def _timed(fn, *args, **kw):
    t = time.perf_counter()
    try:
        return fn(*args, **kw)
    finally:
        assert time.perf_counter() - t < 2.0, "hang guard"  # speed itself is not asserted


@pytest.mark.parametrize("edit, field", [
    ({"slip_prob": HUGE}, "slip_prob"),
    ({"slip_prob": -HUGE}, "slip_prob"),
    ({"step_limit_factor": HUGE}, "step_limit_factor"),
    ({"hole_ratio": {"5": HUGE}}, "hole_ratio.5"),
    ({"hole_ratio": [HUGE] * 8}, "hole_ratio.3"),
    ({"size_weights": {"4": HUGE}}, "size_weights.4"),
    ('{"slip_prob": ' + DIGITS_5000 + "}", "slip_prob"),
    ('{"slip_prob": -' + DIGITS_5000 + "}", "slip_prob"),
    ('{"hole_ratio": {"3": ' + DIGITS_5000 + "}}", "hole_ratio.3"),
    ('{"slip_prob": NaN}', "slip_prob"),
    ('{"slip_prob": 1e999}', "slip_prob"),
    ({"slip_prob": float("inf")}, "slip_prob"),
])
def test_huge_and_non_finite_numbers(edit, field):
    with pytest.raises(ConfigError) as e:
        _timed(SPACE.parse, edit)
    assert e.value.field == field and len(str(e.value)) < 300
    values, adj = _timed(SPACE.project, edit)
    SPACE.validate(values)
    assert values == SPACE.default() or field.startswith("size_weights")
    assert any(a.field == field and a.reason == "not a number" for a in adj), adj
    json.dumps([a.model_dump() for a in adj], allow_nan=False)


def test_huge_numbers_in_a_base_config():
    base = dict(SPACE.default(), slip_prob=HUGE, hole_ratio=[0.1] * 7 + [HUGE])
    with pytest.raises(ConfigError) as e:
        SPACE.parse({"slip_prob": 0.1}, base)
    assert e.value.field == "hole_ratio.10"  # the first bad field, in knob order
    values, adj = SPACE.project({"slip_prob": 0.1}, base)
    assert values["slip_prob"] == 0.1 and values["hole_ratio"][7] == 0.2
    assert {(a.field, a.reason) for a in adj} == {
        ("slip_prob", "base config: not a number"), ("hole_ratio.10", "base config: not a number")}


@pytest.mark.parametrize("edit, needle", [
    ("[" * 10**5, "longer than"),
    ("[" * (MAX_JSON_CHARS - 10), "nested deeper"),
    ('{"a": ' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1), "nested deeper"),
    ('{"slip_prob": 0.1, "pad": "' + "x" * MAX_JSON_CHARS + '"}', "longer than"),
    (_deep_dict(10**5), "nested deeper"),
    ({"bogus": list(range(10**5))}, "more than"),
    ('{"slip_prob": 0.1', "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
])
def test_oversized_or_deep_edits_are_config_errors(edit, needle):
    for fn in (SPACE.parse, SPACE.project):
        with pytest.raises(ConfigError) as e:
            _timed(fn, edit)
        assert e.value.field == "<edit>" and needle in e.value.message, e.value.message


def test_cyclic_dict_edit_is_a_config_error():
    edit: dict = {"hole_ratio": {}}
    edit["hole_ratio"]["3"] = edit
    with pytest.raises(ConfigError) as e:
        _timed(SPACE.project, edit)
    assert e.value.field == "<edit>"


def test_brackets_inside_strings_do_not_count_as_depth():
    text = json.dumps({"slip_prob": 0.1, "note": "[{" * 1000 + '\\"'})
    assert loads_bounded(text)["slip_prob"] == 0.1
    values, adj = SPACE.project(text)
    assert values["slip_prob"] == 0.1 and [a.reason for a in adj] == ["unknown field"]


def test_adjustments_stay_small_and_serialisable():
    values, adj = SPACE.project({"slip_prob": "x" * 10**6, "bogus" * 1000: [[[[[1]]]]],
                                 "hole_ratio": {"3": float("nan"), "4": "0.3"},
                                 "step_limit_factor": np.float32(2.5)})
    assert values["hole_ratio"][:2] == [0.2, 0.3] and values["step_limit_factor"] == 2.5
    text = json.dumps([a.model_dump() for a in adj], allow_nan=False)
    assert len(text) < 2000
    reasons = {a.field: a.reason for a in adj}
    assert reasons["hole_ratio.4"] == "number written as a string"
    assert reasons["hole_ratio.3"] == "not a number"
