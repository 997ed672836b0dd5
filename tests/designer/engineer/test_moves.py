"""The moves language (`designer.engineer.moves`): every admitted move changes the config and
stays in bounds, on MAPF (both presets) and every control family; a diagnosis outside F's
cells cannot be written and is rejected; fuzzed replies never crash; `--edits` resolves per
backend; a logged moves run replays to the same configs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from designer.engineer import move_ops
from designer.engineer import moves as mv
from designer.engineer.edits import preset_space
from designer.engineer.sampling import random_values
from jaxenv.control.family import make_range_space
from jaxenv.control.registry import ALL_NAMES, family
from jaxenv.mapf import make_config_space

MAPF = make_config_space(max_size=10, max_agents=5)
SPACES = {"mapf-paper": preset_space(MAPF, "paper"), "mapf-open": preset_space(MAPF, "open"),
          **{f"control-{n}": make_range_space(family(n).params, dict) for n in ALL_NAMES}}
CELLS = ["3 agents 9x9", "4 agents 10x10"]


def _reply(moves: list[str], **diag: str) -> dict:
    return {"training": diag.get("training", "too_easy"), "weakest": diag.get("weakest", "none"),
            "moves": moves, "rationale": "test"}


def _extremes(space, rng: np.random.Generator) -> list[dict]:
    """Configs at the edges: every number at its low or high end, every simplex one-hot, and
    random configs with their ranges in order."""
    out = []
    for end in ("low", "high"):
        v = space.default()
        for k in space.knobs:
            if not k.editable:
                continue
            if k.kind == "simplex":
                hot = 0 if end == "low" else len(k.keys) - 1
                v[k.name] = [1.0 if i == hot else 0.0 for i in range(len(k.keys))]
            elif k.kind in ("float", "int"):
                x = k.low if end == "low" else k.high
                v[k.name] = [x] * len(k.keys) if k.is_vector else x
        out.append(space.validate(v))
    for _ in range(4):
        v = random_values(space, rng)
        for t in mv.targets(space):
            if t.kind == "range":
                lo, hi = sorted((v[t.fields[0]], v[t.fields[1]]))
                v[t.fields[0]], v[t.fields[1]] = lo, hi
        out.append(v)
    return out


@pytest.mark.parametrize("name", list(SPACES))
def test_every_admitted_move_compiles_in_bounds_and_changes_the_config(name) -> None:
    space = SPACES[name]
    rng = np.random.default_rng(0)
    currents = [space.default(), *[random_values(space, rng) for _ in range(4)],
                *_extremes(space, rng)]
    checked = 0
    for cur in currents:
        moves = mv.admitted(space, cur)
        assert moves, "a config with editable knobs always admits a move"
        schema_enum = mv.moves_schema(space, cur, None)["properties"]["moves"]["items"]["enum"]
        assert schema_enum == moves
        combos = [[m] for m in moves] + [
            [moves[i] for i in rng.choice(len(moves), size=min(3, len(moves)), replace=False)]
            for _ in range(30)]
        for ms in combos:
            out = mv.apply_moves(space, _reply(ms), cur, None, constrained=True)
            assert out.ok, (ms, out.rejection)
            space.validate(out.values)
            assert out.changed, ms
            assert out.moves[0] == ms[0]  # the first move always applies
            for t in mv.targets(space):
                lo, hi = (out.values[f] for f in t.fields[:2]) if t.kind == "range" else (0, 0)
                if t.kind == "range" and cur[t.fields[0]] <= cur[t.fields[1]]:
                    assert lo <= hi + 1e-9, (ms, lo, hi)  # a range never inverts
            checked += 1
    assert checked > 100


def test_moves_not_admitted_and_repeats_are_refused_or_dropped_with_a_reason() -> None:
    space = SPACES["mapf-paper"]
    cur = space.default()  # size weights are uniform: spread changes nothing
    assert "spread size_weights small" not in mv.admitted(space, cur)
    out = mv.apply_moves(space, _reply(["spread size_weights small"]), cur, None,
                         constrained=True)
    assert not out.ok and "changes nothing" in out.rejection
    out = mv.apply_moves(space, _reply(["raise hole_ratio 9 small", "lower hole_ratio 9 large",
                                        "focus size_weights 9 large"]), cur, None,
                         constrained=True)
    assert out.ok and out.moves == ["raise hole_ratio 9 small", "focus size_weights 9 large"]
    assert any("second move on hole_ratio" in a.reason for a in out.adjustments)
    assert out.values["hole_ratio"][6] == pytest.approx(0.25)
    assert out.values["size_weights"][6] == pytest.approx(0.5 + 0.5 * 0.125)
    # the slip rule is pinned by the paper preset: no move names it
    assert not any("slip_prob" in m for m in mv.admitted(space, cur))


def test_range_moves_keep_the_grid_and_a_narrowed_range_stops_at_a_point() -> None:
    space = SPACES["control-cartpole"]
    cur = dict(space.default(), length_min=0.45, length_max=0.55)
    out = mv.apply_moves(space, _reply(["narrow length large"]), cur, None, constrained=True)
    assert out.ok and out.values["length_min"] == out.values["length_max"] == 0.5
    assert any("one point" in a.reason for a in out.adjustments)
    # a range's ends move a share of the knob's span (0.25 of 0.1..2.0 = 0.475, 10 grid steps)
    out = mv.apply_moves(space, _reply(["up length medium"]), cur, None, constrained=True)
    assert (out.values["length_min"], out.values["length_max"]) == (0.95, 1.05)
    out = mv.apply_moves(space, _reply(["widen length small"]), cur, None, constrained=True)
    assert (out.values["length_min"], out.values["length_max"]) == (0.25, 0.75)
    assert "narrow length small" not in mv.admitted(space, space.default())


def test_a_range_written_high_end_first_is_the_same_range_to_every_move() -> None:
    space = SPACES["control-cartpole"]
    ends = lambda v: (v["length_min"], v["length_max"])  # noqa: E731
    for cur in (dict(space.default(), length_min=0.45, length_max=0.55),
                dict(space.default(), length_min=0.55, length_max=0.45)):  # the env's same range
        got = {m: ends(mv.apply_moves(space, _reply([m]), cur, None, constrained=True).values)
               for m in ("widen length small", "narrow length small", "up length small")}
        assert got == {"widen length small": (0.25, 0.75),
                       "narrow length small": (0.5, 0.5),
                       "up length small": (0.65, 0.75)}


@pytest.mark.parametrize("name", [n for n in SPACES if n.startswith("control-")])
def test_the_ranges_move_is_every_range_own_move_at_once(name) -> None:
    space = SPACES[name]
    cur = space.default()
    ranges = [t for t in move_ops.targets(space) if t.kind == "range" and not t.members]
    for op, size in (("widen", "large"), ("up", "small"), ("down", "medium")):
        spelled = f"{op} ranges {size}"
        if spelled not in mv.admitted(space, cur):
            continue
        whole = mv.apply_moves(space, _reply([spelled]), cur, None, constrained=True)
        one_by_one = dict(cur)
        for t in ranges:
            one_by_one.update(move_ops.moved(t, op, None, size, cur)[0])
        assert whole.ok and whole.values == space.parse({}, one_by_one)
        assert set(whole.changed) <= {f for t in ranges for f in t.fields}
    # a server's second move on a knob the ranges move already moved is dropped
    first = ranges[0].name
    out = mv.apply_moves(space, _reply(["widen ranges large", f"widen {first} small"]), cur,
                         None, constrained=False)
    assert out.ok and out.moves == ["widen ranges large"]
    assert any(f"second move on {first}" in a.reason for a in out.adjustments)


def test_a_diagnosis_naming_a_missing_cell_cannot_be_written_and_is_rejected() -> None:
    space = SPACES["mapf-paper"]
    schema = mv.moves_schema(space, space.default(), CELLS)
    assert schema["properties"]["weakest"]["enum"] == CELLS
    assert mv.moves_schema(space, space.default(), None)["properties"]["weakest"]["enum"] == \
        ["none"]
    bad = _reply(["raise hole_ratio 9 small"], weakest="5 agents 3x3")
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(_reply(["raise hole_ratio 9 small"], weakest=CELLS[1]), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)
    for constrained in (True, False):
        out = mv.apply_moves(space, bad, None, CELLS, constrained=constrained)
        assert not out.ok and "weakest" in out.rejection and "5 agents 3x3" in out.rejection
    out = mv.apply_moves(space, _reply(["raise hole_ratio 9 small"], training="bored"), None,
                         CELLS, constrained=False)
    assert not out.ok and "training" in out.rejection


def test_unconstrained_replies_drop_unknown_moves_and_keys_with_reasons() -> None:
    space = SPACES["mapf-open"]
    reply = {**_reply(["raise holes 9 small", "raise slip_prob huge", "raise slip_prob small",
                       "lower step_limit_factor small"]), "extra": 1}
    out = mv.apply_moves(space, json.dumps(reply), None, None, constrained=False)
    assert out.ok and out.moves == ["raise slip_prob small"] and out.changed == ["slip_prob"]
    reasons = " ".join(a.reason for a in out.adjustments)
    assert "unknown key" in reasons and "not a move" in reasons and "names no target" in reasons
    assert "more than 3 moves" in reasons
    assert not mv.apply_moves(space, json.dumps(reply), None, None, constrained=True).ok
    json.dumps(out.to_dict(), allow_nan=False)


MOVE_WORDS = ["raise", "lower", "focus", "spread", "up", "down", "widen", "narrow", "set",
              "hole_ratio", "size_weights", "slip_prob", "agent_weights", "all", "9", "3", "11",
              "small", "medium", "large", "huge", "", " ", "\u00e9", "x" * 200]
ANY = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                   lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c,
                                                                     max_size=4), max_leaves=8)
MOVE = st.lists(st.sampled_from(MOVE_WORDS), min_size=0, max_size=5).map(" ".join) | ANY
REPLY = st.fixed_dictionaries(
    {}, optional={"training": st.sampled_from([*mv.TRAINING, "meh"]) | ANY,
                  "weakest": st.sampled_from([*CELLS, "none", "9x9"]) | ANY,
                  "moves": st.lists(MOVE, max_size=6) | ANY,
                  "rationale": st.text(max_size=200) | ANY, "extra": ANY})


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(reply=REPLY, constrained=st.booleans(), preset=st.sampled_from(["paper", "open"]),
       as_text=st.booleans())
def test_fuzzed_moves_replies_apply_in_bounds_or_are_rejected_with_a_reason(
        reply, constrained, preset, as_text) -> None:
    space = SPACES[f"mapf-{preset}"]
    text = json.dumps(reply) if as_text else reply
    out = mv.apply_moves(space, text, None, CELLS, constrained=constrained)
    if out.ok:
        space.validate(out.values)
        assert out.changed and 1 <= len(out.moves) <= mv.MAX_MOVES
        assert len(out.rationale) <= mv.RATIONALE_CHARS
    else:
        assert isinstance(out.rejection, str) and 0 < len(out.rejection) < 1000
    json.dumps(out.to_dict(), allow_nan=False)


@pytest.mark.parametrize("edits,backend,language", [
    ("auto", "transformers", "moves"), ("auto", "llamacpp", "moves"),
    ("auto", "replay", "moves"), ("auto", "openai", "values"), ("auto", "vllm", "values"),
    ("moves", "openai", "moves"), ("values", "transformers", "values")])
def test_edits_resolves_per_backend(edits, backend, language) -> None:
    from designer.settings import RunSettings, migrate

    s = RunSettings(edits=edits, backend=backend,
                    base_url="http://localhost:1" if backend == "openai" else None)
    assert s.edit_language == language
    assert RunSettings(engineer="self", backend="openai", base_url="http://localhost:1"
                       ).edit_language == "moves"  # the checkpoint is a local decoder
    saved = s.model_dump(mode="json")
    saved.pop("edits")  # a run saved before the option ran raw values
    assert migrate({"settings": saved}).edit_language == "values"


def test_the_edits_flag_is_generated_from_the_settings() -> None:
    import argparse

    from designer.cli.flags import CliError, add_run_flags, build_settings

    p = argparse.ArgumentParser()
    add_run_flags(p)
    assert build_settings(p.parse_args(["--edits", "values"])).edits == "values"
    assert build_settings(p.parse_args([])).edits == "auto"
    with pytest.raises(CliError, match="edits"):
        build_settings(p.parse_args(["--edits", "digits"]))


def test_the_prompts_fill_one_template_per_role_in_each_language() -> None:
    from designer.engineer.context import Context, ContextBuilder
    from designer.engineer.roles import RoleCall, answer

    space = SPACES["mapf-paper"]
    ctx = Context(stage=1, stages_total=6, env_steps_per_stage=10, env_steps_so_far=20,
                  current=space.default(), space=space)

    class Echo:
        def generate(self, messages, schema, **kw):
            self.messages, self.schema = messages, schema
            return []

    for lang in ("values", "moves"):
        call = RoleCall(Echo(), ContextBuilder(token_budget=10**6), True, 96, 0, language=lang)
        call.ask(ctx, "single.md", {}, 1)
        user = call.backend.messages[1]["content"]
        assert "$" not in user and answer(lang, "single.md") in user
        assert ("raise hole_ratio" in user) == (lang == "moves")
    assert '"weakest"' in answer("moves", "analyst.md", CELLS) and CELLS[0] in \
        answer("moves", "analyst.md", CELLS)
    assert '"weakest"' not in answer("moves", "engineer.md", CELLS, diagnosis=False)


@pytest.mark.slow
def test_a_replayed_moves_run_gives_the_same_configs(tmp_path) -> None:
    pytest.importorskip("torch", reason="the transformers backend needs the llm extra")
    pytest.importorskip("outlines", reason="the transformers backend needs the llm extra")
    from designer.engineer.context import Context, ContextBuilder
    from designer.engineer.engineers import LLMEngineer
    from designer.llm import LoggedBackend
    from designer.llm.calllog import CallLog
    from designer.llm.replay import ReplayBackend
    from tests.helpers.tiny_llm import tiny_backend

    space = SPACES["mapf-open"]
    ctx = Context(stage=1, stages_total=6, env_steps_per_stage=10, env_steps_so_far=20,
                  current=space.default(), space=space, train={"success_rate": 0.9})
    path = tmp_path / "calls.jsonl"

    def engineer(backend):
        return LLMEngineer(backend, ContextBuilder(token_budget=10**6), n=3, max_tokens=400,
                           seed=2, edits="moves")

    first = engineer(LoggedBackend(tiny_backend(), CallLog(path))).propose(ctx)
    assert first and all(p.source.startswith("llm:") for p in first)
    replayed = engineer(ReplayBackend(path))
    again = replayed.propose(ctx)
    assert [p.values for p in again] == [p.values for p in first]
    for p in first:
        assert p.values != ctx.current  # never a no-op
    drafts = replayed.last_prompt["drafts"]
    assert replayed.last_prompt["edits"] == "moves"
    assert all(d["moves"] for d in drafts if d["error"] is None)


def test_the_team_in_moves_verifies_all_drafts_once_and_the_critic_reads_the_scores() -> None:
    from types import SimpleNamespace

    from designer.engineer.context import Context, ContextBuilder
    from designer.engineer.engineers import LLMEngineer
    from designer.llm.base import Reply

    space = SPACES["mapf-paper"]
    verified: list[list[dict]] = []

    def verify(values: list[dict]) -> list:
        verified.append(values)
        return [SimpleNamespace(success=0.5 + 0.1 * i, learnability=0.25) for i in
                range(len(values))]

    ctx = Context(stage=1, stages_total=6, env_steps_per_stage=10, env_steps_so_far=20,
                  current=space.default(), space=space, verify=verify)

    class Scripted:
        name, model, constrained = "scripted", "team", True
        prompts: list[str] = []

        def generate(self, messages, schema, n=1, max_tokens=96, seed=0):
            self.prompts.append(messages[1]["content"])
            props = schema["properties"]
            if "verdict" in props:  # the critic revises the first draft, rejects the second
                first = len([p for p in self.prompts if "You are the critic" in p]) == 1
                obj = {"verdict": "revise", "reason": "too big",
                       "revised": ["lower wait_ratio all small"]} if first else \
                    {"verdict": "reject", "reason": "hopeless"}
            elif "moves" in props:
                assert "training" not in props  # the analyst wrote the diagnosis
                obj = {"moves": ["raise hole_ratio 9 small"], "rationale": "harder"}
            else:
                obj = {"training": "too_easy", "weakest": "none"}
            text = json.dumps(obj)
            return [Reply(text, obj, None, 10, 5, 0.0, self.name, self.model)] * n

    backend = Scripted()
    eng = LLMEngineer(backend, ContextBuilder(token_budget=10**6), roles="team", n=2,
                      edits="moves")
    props = eng.propose(ctx)
    assert len(verified) == 1 and len(verified[0]) == 2  # one call for all drafts
    critic = [p for p in backend.prompts if "You are the critic" in p]
    assert len(critic) == 2 and "success 0.50, learnability 0.25" in critic[0]
    assert "success 0.60" in critic[1] and "raise hole_ratio 9 small" in critic[0]
    assert len(props) == 1  # the second was rejected
    assert props[0].values["wait_ratio"] == [0.25] * 8  # the critic's revision
    assert eng.last_prompt["diagnosis"] == "training too_easy; weakest none"
    assert eng.max_tokens == mv.MAX_TOKENS["moves"]


def test_a_space_where_nothing_can_move_falls_back_to_the_rules_engineer() -> None:
    from designer.engineer.context import Context, ContextBuilder
    from designer.engineer.engineers import LLMEngineer
    from jaxenv.config_space import ConfigSpace, Knob

    space = ConfigSpace([Knob(name="x", kind="float", low=0.5, high=0.5, default=0.5,
                              description="A knob with one value.")], dict)
    assert mv.admitted(space, space.default()) == []
    ctx = Context(stage=1, stages_total=6, env_steps_per_stage=10, env_steps_so_far=20,
                  current=space.default(), space=space)

    class Never:
        name, model, constrained = "never", "called", True

        def generate(self, *a, **kw):
            raise AssertionError("no prompt is sent when no move is admitted")

    eng = LLMEngineer(Never(), ContextBuilder(token_budget=10**6), edits="moves")
    props = eng.propose(ctx)
    assert props and props[0].source == "rules (fallback)"
    assert "no move changes this config" in eng.last_fallback


@pytest.mark.parametrize("name", list(SPACES))
def test_the_longest_reply_the_grammar_admits_fits_the_token_limit(name) -> None:
    """At one token per character (the worst a constrained decoder does), never cut."""
    space = SPACES[name]
    cur = random_values(space, np.random.default_rng(1))
    moves = sorted(mv.admitted(space, cur), key=len)[-mv.MAX_MOVES:]
    longest = {"training": max(mv.TRAINING, key=len), "weakest": "x" * 40, "moves": moves,
               "rationale": "x" * mv.RATIONALE_CHARS}
    assert len(json.dumps(longest, separators=(",", ":"))) <= mv.MAX_TOKENS["moves"]


@pytest.mark.parametrize("name", sorted(SPACES))
def test_a_moves_prompt_with_a_full_f_fits_the_moves_token_budget(name) -> None:
    """The moves language's default budget holds every family's prompt, with an F table of
    four bins per range (or MAPF's full table): cuts may drop optional parts, never fail."""
    from designer.engineer.context import Context, ContextBuilder
    from designer.engineer.roles import RoleCall, single
    from designer.tasks.control.failures import ControlFailures

    space = SPACES[name]
    f = None
    if name.startswith("control-"):
        ranges = [t for t in move_ops.targets(space) if t.kind == "range"]
        rows = {t.name: [{"value_lo": 0.1 * i, "value_hi": 0.1 * i + 0.1, "n": 16,
                          "success": 25.0 * i, "normalized_return": 0.2 * i}
                         for i in range(4)] for t in ranges}
        f = ControlFailures(split="validation", family=name, n=64, success=40.0,
                            normalized_return=0.5, endings={"time_limit": 0.4, "angle": 0.6},
                            failed_endings={"angle": 38}, by_param=rows,
                            train={"success_rate": 0.5, "cause_angle": 0.5})
    ctx = Context(stage=2, stages_total=6, env_steps_per_stage=10, env_steps_so_far=30,
                  current=space.default(), space=space, failures=f,
                  train={"success_rate": 0.5})

    class Echo:
        def generate(self, messages, schema, **kw):
            return []

    builder = ContextBuilder(token_budget=mv.TOKEN_BUDGET["moves"])
    call = RoleCall(Echo(), builder, True, 96, 0, language="moves")
    single(call, ctx, 1)
    assert call.prompts[0]["tokens"] <= mv.TOKEN_BUDGET["moves"] < mv.TOKEN_BUDGET["values"]


def test_a_rendered_reply_reads_back_to_the_same_moves_and_diagnosis() -> None:
    space = SPACES["mapf-paper"]
    cur = space.default()
    by_target = {m.split()[1]: m for m in reversed(mv.admitted(space, cur))}
    moves = list(by_target.values())[:2]  # two targets, one move each
    diag = {"training": "too_hard", "weakest": CELLS[1]}
    text = mv.reply_text(diag, moves, "harder maps")
    out = mv.apply_moves(space, text, cur, CELLS, constrained=True)
    assert out.ok and out.moves == moves and out.diagnosis == diag
    assert json.loads(text) == mv.reply(diag, moves, "harder maps")


def test_the_one_move_grammar_admits_one_move_and_bad_counts_are_refused() -> None:
    space = SPACES["mapf-paper"]
    schema = mv.moves_schema(space, space.default(), CELLS, max_moves=1)
    assert schema["properties"]["moves"]["maxItems"] == 1
    for bad in (0, mv.MAX_MOVES + 1):
        with pytest.raises(ValueError, match="max_moves"):
            mv.moves_schema(space, space.default(), CELLS, max_moves=bad)
