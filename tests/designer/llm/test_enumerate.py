"""designer.llm.enumerate: exact option scores, grammar-valid replies, distinct moves.

- differential: the log-probability the one-pass option trie gives each option equals the
  model's own, fed each option's text whole;
- 1,000 replies of the one-move grammar through the backend's enumeration path all parse,
  apply and change the config; the moves of one call differ while the nucleus allows, and
  past a nucleus smaller than the call (a peaked model's) from outside it, in the model's order;
- which schemas take the path (enum grammars) and which stay with outlines.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the transformers backend needs the llm extra")
pytest.importorskip("outlines", reason="the transformers backend needs the llm extra")

from designer.engineer import moves as mv  # noqa: E402
from designer.engineer.edits import edit_schema, preset_space  # noqa: E402
from designer.engineer.sampling import random_values  # noqa: E402
from designer.llm.enumerate import EnumSampler, _Group, draw, enum_plan  # noqa: E402
from jaxenv.mapf import make_config_space  # noqa: E402
from tests.helpers.tiny_llm import tiny_backend  # noqa: E402

SPACE = preset_space(make_config_space(), "open")
CELLS = ["3 agents 9x9", "4 agents 10x10", "5 agents 5x5"]


def _messages(i: int) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Design the next stage. Reply with JSON."},
            {"role": "user", "content": f"Stage {i}. Most failures are holes on 9x9 maps."}]


@pytest.fixture(scope="module")
def tiny():
    return tiny_backend()


def test_option_scores_equal_the_models_own_log_probabilities(tiny) -> None:
    from transformers import DynamicCache

    es = EnumSampler(tiny.lm, tiny.tokenizer)
    ids = tiny.prompt_ids(_messages(0))
    schema = mv.moves_schema(SPACE, SPACE.default(), CELLS, max_moves=1)
    plan = enum_plan(schema)
    with torch.inference_mode():
        for field, done in ((plan[0], ""), (plan[2], '{"training":"too_easy","weakest":'
                                                     '"3 agents 9x9"')):
            cache = DynamicCache()
            full = es._ids(ids, done)
            es._feed(cache, full[:-1], 0)
            g = _Group(done, [0], cache, full)
            seqs = [es._ids(ids, done + field.opening(not done) + o + field.closing())
                    for o in field.options]
            got, keep, _ = es._option_logprobs(g, seqs)
            for s, score in zip(seqs, got):
                logp = tiny.lm(input_ids=torch.tensor([s])).logits[0].float().log_softmax(-1)
                ref = sum(float(logp[j, s[j + 1]]) for j in range(keep, len(s) - 1))
                assert float(score) == pytest.approx(ref, abs=1e-4)
            assert cache.get_seq_length() == keep  # the options' keys are dropped again


@pytest.mark.slow
def test_1000_enumerated_one_move_replies_parse_apply_and_change_the_config(tiny) -> None:
    rng = np.random.default_rng(0)
    replies, moves, calls_with_distinct = 0, set(), 0
    for i in range(20):
        cur = random_values(SPACE, rng) if i % 2 else SPACE.default()
        schema = mv.moves_schema(SPACE, cur, CELLS, max_moves=1)
        assert enum_plan(schema) is not None
        batch = tiny.generate(_messages(i), schema, n=50, max_tokens=288, seed=i)
        for r in batch:
            assert r.error is None, (r.error, r.text)
            out = mv.apply_moves(SPACE, r.edit, cur, CELLS, constrained=True)
            assert out.ok and out.changed and out.values != cur, (out.rejection, r.text)
            SPACE.validate(out.values)
            assert len(r.edit["rationale"]) <= mv.RATIONALE_CHARS
            moves |= set(out.moves)
            replies += 1
        first = [tuple(r.edit["moves"]) for r in batch[:4]]
        calls_with_distinct += len(set(first)) == 4
    assert replies == 1000
    assert len(moves) > 30  # many moves, not one repeated (whole-option probabilities of a
    # random model are peaked: fewer distinct moves than token-wise sampling reaches)
    assert calls_with_distinct >= 15  # a call's candidates differ (Gumbel top-k)


def test_the_same_seed_gives_the_same_replies_and_max_tokens_cuts(tiny) -> None:
    schema = mv.moves_schema(SPACE, SPACE.default(), CELLS, max_moves=1)
    a = tiny.generate(_messages(1), schema, n=4, max_tokens=288, seed=3)
    b = tiny.generate(_messages(1), schema, n=4, max_tokens=288, seed=3)
    assert [r.text for r in a] == [r.text for r in b]
    cut = tiny.generate(_messages(1), schema, n=2, max_tokens=5, seed=3)
    assert all(r.edit is None and r.error.startswith("cut at max_tokens=5") for r in cut)


def test_only_enum_grammars_take_the_enumeration_path() -> None:
    cur = SPACE.default()
    assert [f.name for f in enum_plan(mv.moves_schema(SPACE, cur, CELLS, max_moves=1))] == \
        ["training", "weakest", "moves", "rationale"]
    assert enum_plan(mv.analyst_schema(CELLS)) is not None
    assert enum_plan(mv.moves_schema(SPACE, cur, CELLS)) is None  # up to 3 moves: outlines
    assert enum_plan(edit_schema(SPACE)) is None  # numbers: outlines
    assert enum_plan(None) is None
    quoted = {"type": "object", "properties": {"a": {"enum": ['say "hi"']}},
              "required": ["a"], "additionalProperties": False}
    assert enum_plan(quoted) is None  # an option that needs escaping



def test_gathered_option_caches_and_the_first_batched_step_equal_the_models_own(tiny) -> None:
    """Differential: after a decision each group's cache (gathered from the option trie, not
    recomputed) equals the model's cache of its whole text, and the free text's first batched
    step (rows of different lengths left-padded, the opening fed with it) gives each row the
    logits of the model fed that row's whole text."""
    from transformers import DynamicCache

    es = EnumSampler(tiny.lm, tiny.tokenizer)
    ids = tiny.prompt_ids(_messages(2))
    plan = enum_plan(mv.moves_schema(SPACE, random_values(SPACE, np.random.default_rng(1)),
                                     CELLS, max_moves=1))
    gen = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        cache = DynamicCache()
        es._feed(cache, ids[:-1], 0)
        groups = [_Group("", [0, 1, 2], cache, list(ids))]
        for i, f in enumerate(plan[:-1]):  # the replies take distinct moves (Gumbel top-k)
            groups = [h for g in groups for h in es._decide(g, ids, f, i == 0, 1.0, 1.0, gen)]
        assert len(groups) == 3
        for g in groups:
            ref = DynamicCache()
            es._feed(ref, g.full[:-1], 0)
            for a, b in zip(g.cache.layers, ref.layers):
                torch.testing.assert_close(a.keys, b.keys, atol=1e-5, rtol=1e-4)
                torch.testing.assert_close(a.values, b.values, atol=1e-5, rtol=1e-4)
        opening = tiny.tokenizer(plan[-1].opening(False), add_special_tokens=False)["input_ids"]
        rows, batch, seen, last, pos = es._batch(groups, opening)
        mask = torch.cat([seen, torch.ones(last.shape, dtype=torch.long)], 1)
        got = tiny.lm(input_ids=last, attention_mask=mask, position_ids=pos,
                      past_key_values=batch).logits[:, -1].float()
        for r, (_, g) in enumerate(rows):
            want = tiny.lm(input_ids=torch.tensor([g.full + opening])).logits[0, -1].float()
            torch.testing.assert_close(got[r], want, atol=1e-5, rtol=1e-4)


def _nucleus_only(scores, n, top_p, gen):
    """The draw before outside options were admitted: Gumbel top-k within the nucleus, again
    and again."""
    order = torch.argsort(scores, descending=True)
    probs = torch.softmax(scores[order], 0)
    allowed = order[:max(int((torch.cumsum(probs, 0) - probs < top_p).sum()), 1)]
    picks = []
    while len(picks) < n:
        u = torch.rand(len(allowed), generator=gen).clamp(1e-12, 1 - 1e-12)
        keys = scores[allowed] - torch.log(-torch.log(u))
        picks += allowed[torch.argsort(keys, descending=True)][:n - len(picks)].tolist()
    return picks


def test_distinct_draws_leave_a_small_nucleus_in_the_models_order_and_keep_a_wide_one() -> None:
    peaked = torch.tensor([0.0, -9.0, -1.0, -12.0, -3.0, -30.0])  # nucleus at 0.9: 2 options
    for seed in range(20):
        gen = torch.Generator().manual_seed(seed)
        picks = draw(peaked, 4, temperature=1.0, top_p=0.9, distinct=True, gen=gen)
        assert len(set(picks)) == 4 and set(picks[:2]) == {0, 2}  # the nucleus, then the rest
        old = _nucleus_only(peaked, 4, 0.9, torch.Generator().manual_seed(seed))
        assert len(set(old)) == 2  # the defect: two of four candidates repeat
        gen = torch.Generator().manual_seed(seed)
        every = draw(peaked, 8, temperature=1.0, top_p=0.9, distinct=True, gen=gen)
        assert set(every[:6]) == set(range(6)) and set(every[6:]) <= {0, 2}
        gen = torch.Generator().manual_seed(seed)
        assert set(draw(peaked, 4, temperature=1.0, top_p=0.5, distinct=False,
                        gen=gen)) == {0}  # plain enums stay inside the nucleus
    flat = torch.log_softmax(torch.randn(40, generator=torch.Generator().manual_seed(0)), 0)
    for seed in range(20):  # a nucleus as large as the call: the draws are as they were
        a = draw(flat, 4, temperature=0.7, top_p=0.95, distinct=True,
                 gen=torch.Generator().manual_seed(seed))
        assert a == _nucleus_only(flat / 0.7, 4, 0.95, torch.Generator().manual_seed(seed))
