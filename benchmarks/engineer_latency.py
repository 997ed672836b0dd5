"""Latency of the environment engineer: verification of candidates and LLM proposals.

- Verification: seconds per candidate to generate `--episodes` fresh levels from a candidate
  config and play them with the current policy (`designer.run.scoring.CandidateScorer`, one
  jitted call for `--k` candidates), and the number of compilations over `--stages` stages of
  random candidate batches after warm-up (goal: 0);
- Proposals: seconds per proposal (one engineer call writing the run's `candidates` edits, as
  in a stage) and per candidate, reply tokens (the model's own counts) and the share of
  candidates equal to the current config (no-ops), of the embedded SmolLM2-135M (transformers +
  outlines, CPU) writing grammar-constrained edits in the `--edits` language from a real
  context, in `single` and `team` role modes (skipped, and said so, where the `llm` extra is
  not installed);
- The LLM's share of a stage: a short loop run with the `llm` engineer (`--loop-stages`
  stages at the default stage budget), the propose phase over the stages' wall time.

The policy is trained for `--train-stages` short stages first, so episodes last as long as
they do in a run. Medians of the timed stages after one warm-up.

    python benchmarks/engineer_latency.py --json benchmarks/results/engineer_latency_cpu2.json
    python benchmarks/engineer_latency.py --quick --edits moves
    python benchmarks/engineer_latency.py --backend llamacpp   # the llama.cpp backend
"""

from __future__ import annotations

import argparse
import platform
import statistics
from pathlib import Path

import jax
import numpy as np
from harness import command, positive_int, time_call, time_rounds, write_json

from designer.engineer.sampling import random_values
from designer.settings import CapacitySettings, RunSettings, TraineeSettings, VerifySettings


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--k", type=positive_int, default=4, help="candidates per verification call")
    p.add_argument("--episodes", type=positive_int, default=1024, help="levels per candidate")
    p.add_argument("--stages", type=positive_int, default=20, help="timed verification stages")
    p.add_argument("--train-stages", type=int, default=2)
    p.add_argument("--proposals", type=positive_int, default=3, help="timed LLM proposals per mode")
    p.add_argument("--edits", choices=("moves", "values"), default="moves",
                   help="the engineer's edit language")
    p.add_argument("--loop-stages", type=int, default=3,
                   help="stages of the loop run that measures the LLM's share (0: skip)")
    p.add_argument("--quick", action="store_true", help="a run under 10 minutes")
    p.add_argument("--no-llm", action="store_true", help="skip the LLM part")
    p.add_argument("--backend", default="transformers",
                   help="LLM backend (transformers, llamacpp, openai, vllm)")
    p.add_argument("--model", default=None, help="model path or name (default: SmolLM2-135M)")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server (openai)")
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    if a.quick:
        a.stages, a.train_stages, a.proposals, a.loop_stages = 5, 1, 1, 2
    return a


def main(argv: list[str] | None = None) -> dict:
    from designer.run.loop import ClosedLoop

    a = parse(argv)
    settings = RunSettings(engineer="rules", backend=a.backend, model=a.model, edits=a.edits,
                           base_url=a.base_url, stages=a.train_stages + 1, stage_steps=262_144,
                           capacity=CapacitySettings(), trainee=TraineeSettings(),
                           verify=VerifySettings(k=a.k, episodes=a.episodes))
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        loop = ClosedLoop(settings, tmp)
        runner = loop.trainee.init(jax.random.PRNGKey(0))
        values = loop.space.default()

        def train(runner):
            for i in range(a.train_stages):
                runner, _ = loop.trainee.train_stage(
                    runner, loop.space.to_config(values), jax.random.PRNGKey(i))
            return runner

        runner, t = time_call(train, runner)
        train_s = t.wall_s
        verifier, space = loop.scorer, loop.space
        rng = np.random.default_rng(0)
        warm_s = time_call(verifier.score, runner.params, [values] * a.k, values,
                           jax.random.PRNGKey(99))[1].wall_s
        compiled = verifier.compiled
        cands = [[random_values(space, rng) for _ in range(a.k)] for _ in range(a.stages)]
        per_call = time_rounds({"verify": lambda r: verifier.score(
            runner.params, cands[r - 1], values, jax.random.PRNGKey(r - 1))},
            a.stages, warmup=False)["verify"].wall_s
        out = {
            "device": str(jax.devices()[0]), "jax": jax.__version__,
            "platform": platform.platform(), "k": a.k, "episodes_per_candidate": a.episodes,
            "train_s": train_s, "verify_warmup_s": warm_s,
            "verify_s_per_call": statistics.median(per_call),
            "verify_s_per_candidate": statistics.median(per_call) / a.k,
            "verify_calls": per_call,
            "recompiles_after_warmup": verifier.compiled - compiled,
        }
        print(f"verification: {out['verify_s_per_candidate']:.2f} s per candidate "
              f"({a.episodes} episodes, generation included; median of {a.stages} calls of "
              f"{a.k}), warm-up {warm_s:.1f} s, recompiles after warm-up "
              f"{out['recompiles_after_warmup']}", flush=True)
        if not a.no_llm:
            out.update(llm_latency(loop, runner, a.proposals))
    if not a.no_llm and a.loop_stages and "llm_skipped" not in out:
        out.update(llm_share(settings, a.loop_stages))
    write_json(a.json, out, command=command(__file__, argv), seeds=[0])
    return out


class TokenCounter:
    """The backend, counting the completion tokens of its replies (the model's own count)."""

    def __init__(self, backend):
        self.backend, self.tokens, self.replies = backend, 0, 0

    def __getattr__(self, name: str):  # name, model, constrained: the backend's, once loaded
        return getattr(self.backend, name)

    def count_tokens(self, messages) -> int:
        return self.backend.count_tokens(messages)

    def generate(self, *args, **kw):
        replies = self.backend.generate(*args, **kw)
        self.tokens += sum(r.completion_tokens for r in replies)
        self.replies += len(replies)
        return replies


def llm_latency(loop, runner, n: int) -> dict:
    """Seconds per proposal, reply tokens and no-op share of the embedded model, single and
    team, from the validation F of the trained policy."""
    from designer.engineer.context import Context
    from designer.engineer.engineers import LLMEngineer
    from designer.llm.open import open_backend

    try:
        backend = open_backend(loop.s, None)
    except Exception as e:  # the llm extra or the model package is missing
        print(f"LLM part skipped: {e}")
        return {"llm_skipped": str(e)}
    val = loop.trainee.evaluate_split(runner, loop.validator, jax.random.PRNGKey(2))
    train = {"success_rate": 0.5}
    values = loop.space.default()
    ctx = Context(stage=1, stages_total=loop.s.stages, env_steps_per_stage=loop.s.stage_steps,
                  env_steps_so_far=2 * loop.s.stage_steps, current=values, space=loop.space,
                  failures=loop.task.failures(val, train, 0), train=train,
                  verify=loop.verify(loop.trainee.policy(runner), 1, values))
    counted = TokenCounter(backend)
    c = loop.s.candidates
    out: dict = {"llm_backend": backend.name, "edits": loop.s.edits,
                 "candidates_per_proposal": c, "max_tokens": loop.s.max_tokens}
    for roles in ("single", "team"):
        eng = LLMEngineer(counted, loop.builder, roles=roles, n=c,
                          max_tokens=loop.s.max_tokens, edits=loop.s.edits)
        times, toks, replies, noops, cands = [], [], 0, 0, 0
        for i in range(n + 1):
            ctx.stage = 1 + i
            counted.tokens, counted.replies = 0, 0
            props, t = time_call(eng.propose, ctx)
            dt = t.wall_s
            if i:  # the first call warms the model up (and compiles the grammar)
                times.append(dt)
                toks.append(counted.tokens)
                replies += counted.replies
                cands += len(props)
                noops += sum(p.values == values for p in props)
            print(f"{roles}: {dt:.1f}s, {counted.tokens} reply tokens, {len(props)} proposal(s) "
                  f"from {props[0].source if props else '-'}, "
                  f"{sum(p.values == values for p in props)} equal to the current config",
                  flush=True)
        out["llm_model"] = counted.model
        s = statistics.median(times)
        tag = "" if roles == "single" else "_team"  # single: the key names
        out[f"proposal_s_{roles}"] = s
        out[f"proposal_s{tag}_per_candidate"] = s / c
        out[f"proposal_s_{roles}_runs"] = times
        out[f"reply_tokens_mean{tag}"] = sum(toks) / max(replies, 1)
        out[f"reply_tokens_per_s{tag}"] = statistics.median(
            t / dt for t, dt in zip(toks, times) if dt)
        out[f"noop_rate{tag}"] = noops / max(cands, 1)
    print(f"proposal of {c} candidates ({loop.s.edits}): single {out['proposal_s_single']:.1f}s "
          f"({out['proposal_s_per_candidate']:.2f} s per candidate, "
          f"{out['reply_tokens_mean']:.0f} tokens per reply, no-ops {out['noop_rate']:.0%}), "
          f"team {out['proposal_s_team']:.1f}s")
    return out


def llm_share(settings, stages: int) -> dict:
    """The LLM's share of a stage's wall time in a short loop run with the `llm` engineer."""
    import tempfile

    from designer.run.loop import ClosedLoop

    s = settings.model_copy(update={"engineer": "llm", "stages": stages,
                                    "stage_steps": RunSettings().stage_steps})
    with tempfile.TemporaryDirectory() as tmp:
        results = ClosedLoop(s, tmp).run()
    asked = [r for r in results if "propose" in r.times]
    phases = lambda r: sum(v for k, v in r.times.items() if k != "verify_episodes")  # noqa: E731
    share = sum(r.times["propose"] for r in asked) / max(sum(map(phases, asked)), 1e-9)
    out = {"llm_share_of_stage": share, "loop_stages": stages,
           "loop_stage_times": [r.times for r in results]}
    print(f"loop: the LLM's share of a stage {share:.0%} over {len(asked)} proposing stage(s)")
    return out


if __name__ == "__main__":
    main()
