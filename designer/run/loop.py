"""The closed loop: train a stage, validate, ask the engineer, verify, choose, record, continue.

Stage k of `ClosedLoop.run()`:
1. train the trainee on the current config for the stage budget (`policy.trainee.Trainee`:
   the jitted PPO trainee, one jit, a new config never recompiles; or the GRPO LLM trainee;
   the state carries over; the loop never branches on the kind);
2. validate on the *validation* split (the engineer's evidence, F) and evaluate on the
   *held-out* split (for the report only; no engineer ever reads it);
3. build the context (F, G, H without round 0, T, optional S) and ask the engineer for
   candidates (an LLM engineer that fails falls back to the `rules` engineer, and the log says
   so);
4. verify every candidate with the current policy on fresh levels (`designer.run.scoring`, one jit)
   and choose by the documented rule (engineers marked unverified take their own proposal);
5. write everything to the run folder and mark the stage done (`designer.run.record`).

After the last stage the run hands back one stage's policy (`designer.run.selection`): by default
the one with the best validation score, written with its held-out table to `selected.json`.

Round 0 starts from a random config drawn from the seed, the same for every engineer, as in
the paper. Every engineer gets the same training budget (stages x env steps per stage);
verification rollouts are counted and reported separately. `resume` continues from the last
finished stage: the trainee is restored from that stage's orbax checkpoint, the history from
its files, and every random draw depends only on (seed, stage), so a resumed run ends where an
uninterrupted one would (LLM calls are replayed from the call log).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import jax
import numpy as np

from designer.engineer.context import Context, ContextBuilder, HistoryEntry, editable_values
from designer.engineer.registry import make_engineer
from designer.engineer.sampling import random_values
from designer.run.folder import SELECTED, RunCorrupt, RunFolder
from designer.run.provenance import broadcast_values, budget, budget_line, git_commit, versions
from designer.run.record import StageResult, load_stage, record_stage
from designer.run.scoring import CandidateScorer
from designer.run.selection import select_stage
from designer.settings import RunSettings, upgrade_saved
from designer.tasks import make_task
from designer.trainees import make_trainee


def round0_values(space: Any, seed: int) -> dict[str, Any]:
    """Round 0's random config: a function of the seed only (the same for every engineer)."""
    return random_values(space, np.random.default_rng([seed, 0x0]))


def warn(message: str) -> None:
    """The loop's default console note: one line on stderr."""
    print(f"note: {message}", file=sys.stderr, flush=True)


class ClosedLoop:
    """One run of the closed loop into a run folder (see the module docstring)."""

    def __init__(self, settings: RunSettings, out: str | Path, *,
                 first: dict[str, Any] | None = None,
                 on_phase: Callable[[int, str, str], None] | None = None,
                 on_note: Callable[[str], None] | None = None,
                 backend: Any = None, processes: Any = None):
        self.s = settings
        self.folder = RunFolder(out)
        # Many processes (`policy.distributed`): training runs over every process's devices;
        # process 0 alone writes the run folder and asks the engineer, and its choice is
        # broadcast, so every process trains on the same configs.
        self.processes = processes
        self.multi = processes is not None and processes.count > 1
        self.on_phase = on_phase or (lambda stage, phase, what: None)
        self.on_note = on_note or warn  # what the user must see: fallbacks, budget, repairs
        # Everything about the environment family (MAPF, a control task, ...) is the task's.
        self.task = make_task(settings)
        self.env, self.space = self.task.env, self.task.space
        # Whatever learns (PPO, the GRPO LLM) is behind `policy.trainee.Trainee`.
        self.trainee = make_trainee(settings, self.task, processes)
        self.validator, self.heldout = self.task.validator, self.task.heldout
        self.eval_cfg = self.task.eval_cfg  # validation and held-out play under the run's rules
        v = settings.verify
        self.scorer = CandidateScorer.from_settings(
            v, evaluator=self.trainee.play_candidates,
            episodes=self.trainee.verify_episodes(v.episodes), targets=self.task.targets,
            space=self.space)
        self.engineer = make_engineer(settings, self.folder, backend=backend, task=self.task,
                                      trainee=self.trainee)
        self.builder = ContextBuilder(settings.context,
                                      guidelines=settings.guidelines or self.task.guidelines,
                                      history_k=settings.history_k,
                                      history_round0=settings.history_round0,
                                      token_budget=settings.prompt_budget,
                                      count_tokens=getattr(self.engineer, "count_tokens", None))
        self.first = first
        self.verify_episodes = 0
        self.self_summary: str | None = None  # S: the chosen proposal's own rationale
        self.selection: dict[str, Any] | None = None  # selected.json, once the run is done
        self.budget = budget(settings, self.trainee)

    # ------------------------------------------------------------------ helpers
    @contextmanager
    def phase(self, stage: int, name: str, times: dict[str, float]) -> Iterator[None]:
        self.on_phase(stage, name, "start")
        t = time.perf_counter()
        yield
        times[name] = times.get(name, 0.0) + time.perf_counter() - t
        self.on_phase(stage, name, "end")

    def key(self, stage: int, what: int) -> jax.Array:
        return jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(self.s.seed), stage),
                                  what)

    def _prompt_fields(self, ctx: Context) -> dict[str, str]:
        """The language-dependent fields of the prompt recorded for an engineer that asks no
        LLM: the run's edit language for a model engineer, raw values otherwise; none where
        no move can change the config."""
        from designer.engineer.moves import NoMoves, moves_per_reply
        from designer.engineer.roles import prompt_fields

        model = self.s.engineer in ("llm", "self")
        try:
            return prompt_fields(self.s.edit_language if model else "values", ctx,
                                 moves=moves_per_reply(self.s.backend))
        except NoMoves:
            return {}

    def verify(self, policy: Any, stage: int, current: dict) -> Callable:
        def run(cands: list[dict]) -> list:
            n = -(-len(cands) // self.scorer.k) * self.scorer.k
            self.verify_episodes += n * self.scorer.episodes
            return self.scorer.score(policy, cands, current, self.key(stage, 7))
        return run

    # --------------------------------------------------------------------- run
    def run(self) -> list[StageResult]:
        if self.multi and not self.processes.is_main:
            return self._run()
        with self.folder:
            return self._run()

    @property
    def main(self) -> bool:
        return not self.multi or self.processes.is_main

    def _run(self) -> list[StageResult]:
        f, s = self.folder, self.s
        done = f.finished_stages()
        if self.main:
            f.discard_partial()
        if not done and self.main:
            f.write_sealed("run.json", {"settings": s.model_dump(), "versions": versions(),
                                        "git_commit": git_commit(), "seed": s.seed,
                                        "budget": self.budget,
                                        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        elif done and (upgrade_saved(f.run_json()["settings"])
                       != json.loads(s.model_dump_json())):
            raise ValueError(f"{f.path} holds a run with other settings; resume it with the "
                             "same flags or choose another --out")
        if self.main and (line := budget_line(self.budget)):
            self.on_note(line)
        runner = self.trainee.init(jax.random.PRNGKey(s.seed))
        history: list[HistoryEntry] = []
        results = [load_stage(f, k, self.space) for k in done]
        if results and self.main and f.write_metrics():
            self.on_note(f"{f.name('metrics.jsonl')} did not match the finished stages: "
                         "rewritten from them")
        if results and results[-1].last:
            return self._finish(results, runner)
        if self.main and (f.path / SELECTED).exists():  # a stage was removed since: stale
            (f.path / SELECTED).unlink()
            self.on_note(f"{f.name(SELECTED)} named a stage that is no longer finished: "
                         "removed; it is written again when the last stage is done")
        for r in results:
            history.append(HistoryEntry(stage=r.stage, values=editable_values(
                self.space, r.values), summary=f.read(
                    f.stage_rel(r.stage) / "validation.json")["summary"]))
        self.verify_episodes = sum(r.times.get("verify_episodes", 0) for r in results)
        if results:
            runner = self.restore(done[-1], runner)
            if self.multi:  # every process has read the same finished stages
                from jax.experimental import multihost_utils

                multihost_utils.sync_global_devices("envengineer resume")
            values = results[-1].choice["next_values"]
        else:
            values = self.space.validate(self.first or round0_values(self.space, s.seed))
        self.self_summary = results[-1].choice.get("rationale") if results else None
        for stage in range(len(done), s.stages):
            runner, result, entry = self._stage(stage, runner, values, history,
                                                train_s=sum(r.times["train"] for r in results))
            results.append(result)
            history.append(entry)
            values = result.choice["next_values"]
            self.self_summary = result.choice.get("rationale") or None
            if result.last:
                break
        return self._finish(results, runner)

    def restore(self, stage: int, runner: Any) -> Any:
        """The trainee state of finished stage `stage` from its checkpoint (its files checked
        against the stage's digests first); RunCorrupt naming the checkpoint when it cannot
        be read."""
        self.folder.verify_stage(stage)
        ckpt = self.folder.stage_dir(stage) / "ckpt"
        absl = logging.getLogger("absl")  # orbax logs each unreadable file before it raises
        level = absl.level
        absl.setLevel(logging.CRITICAL)
        try:
            return self.trainee.restore(ckpt, runner)
        except Exception as e:  # noqa: BLE001 -- whatever orbax raises: a damaged checkpoint
            said = " ".join(str(e).split())[:200]
            raise RunCorrupt(f"{ckpt}: the checkpoint cannot be read ({type(e).__name__}: "
                             f"{said})") from None
        finally:
            absl.setLevel(level)

    # --------------------------------------------------------------- selection
    def _finish(self, results: list[StageResult], runner: Any) -> list[StageResult]:
        """The run's result once its last stage is done: the stage `designer.run.selection`
        chooses on validation, with its held-out table, in `selected.json` (read back when a
        finished run is resumed). A chosen stage whose held-out split was skipped
        (`heldout_every`) is restored from its checkpoint and evaluated with the key the loop
        would have used, so the table is the one the stage itself would have written."""
        if not results or not results[-1].last:
            return results
        f = self.folder
        try:
            self.selection = f.selection()
        except RunCorrupt as e:  # it is recomputed from the stages, as at the run's end
            self.selection = None
            if self.main:
                self.on_note(f"{e}; recomputing it from the stages")
        if self.selection is not None:
            return results
        scores = [self.task.score(r.validation) for r in results]
        k = select_stage(scores, self.s.select)
        held = results[k].heldout
        if held is None:
            held = self.heldout_at(k, runner)
        if self.main:
            self.selection = {"rule": self.s.select, "stage": k, "last_stage": len(results) - 1,
                              "scores": scores,
                              "validation": self.task.headline(results[k].validation),
                              "heldout": held, "heldout_evaluated_after_run": results[k].heldout
                              is None}
            f.write_sealed(SELECTED, self.selection)
        return results

    def heldout_at(self, stage: int, runner: Any) -> dict[str, Any] | None:
        """Stage `stage`'s held-out table from its checkpoint (every process restores; the
        main process evaluates, as in a stage)."""
        runner = self.restore(stage, runner)
        if not self.main:
            return None
        times: dict[str, float] = {}
        with self.phase(stage, "heldout", times):
            held = self.trainee.evaluate_split(runner, self.heldout, self.key(stage, 3))
        return held.table.to_dict()

    def _stage(self, stage: int, runner: Any, values: dict[str, Any],
               history: list[HistoryEntry], train_s: float
               ) -> tuple[Any, StageResult, HistoryEntry]:
        f, s = self.folder, self.s
        times: dict[str, float] = {}
        verified_before = self.verify_episodes
        with self.phase(stage, "train", times):
            runner, metrics = self.trainee.train_stage(runner, self.space.to_config(values),
                                                       self.key(stage, 1))
            train = self.trainee.summarize(metrics, where=f"stage {stage}")
        with self.phase(stage, "validate", times):
            val = self.trainee.evaluate_split(runner, self.validator, self.key(stage, 2))
        out_of_time = (s.train_minutes is not None
                       and train_s + times["train"] >= 60 * s.train_minutes)
        last = stage == s.stages - 1 or out_of_time
        held = None
        if self.main and (last or (stage + 1) % s.heldout_every == 0):
            with self.phase(stage, "heldout", times):
                held = self.trainee.evaluate_split(runner, self.heldout, self.key(stage, 3))
        failures = self.task.failures(val, train, s.seed + stage)
        entry = HistoryEntry(stage=stage, values=editable_values(self.space, values),
                             summary=failures.summary())
        ctx = Context(stage=stage, stages_total=s.stages,
                      env_steps_per_stage=self.trainee.steps_per_stage,
                      env_steps_so_far=self.trainee.steps(runner), current=values,
                      space=self.space,
                      failures=failures, history=list(history), train=train,
                      self_summary=self.self_summary,
                      verify=self.verify(self.trainee.policy(runner), stage, values))
        proposals, scores, choice = [], [], {"index": None, "reason": "last stage: no proposal",
                                             "next_values": values}
        if hasattr(self.engineer, "last_prompt"):
            self.engineer.last_prompt = None
        fallback = None
        if not last and self.main:
            with self.phase(stage, "propose", times):
                proposals = self.engineer.propose(ctx)
            fallback = getattr(self.engineer, "last_fallback", None)
            if fallback:
                self.on_note(f"stage {stage}: the {self.engineer.name} engineer fell back to "
                             f"the rules engineer ({fallback})")
            with self.phase(stage, "verify", times):
                scores = ctx.verify([p.values for p in proposals])
            if getattr(self.engineer, "verified", True):
                c = self.scorer.choose(scores)
                index, reason = c.index, c.reason
            else:
                index, reason = 0, f"{self.engineer.name} takes its own proposal (unverified)"
            choice = {"index": index, "reason": reason,
                      "next_values": values if index is None else proposals[index].values,
                      "rationale": "" if index is None else proposals[index].rationale}
            if fallback:
                choice["fallback"] = fallback
        if self.multi and not last:
            choice = {**choice, "next_values": broadcast_values(choice["next_values"])}
        times["verify_episodes"] = self.verify_episodes - verified_before
        heldout = None if held is None else held.table.to_dict()  # None off the main process
        result = StageResult(stage=stage, values=values, env_steps=self.trainee.steps(runner),
                             times=times, validation=val.table.to_dict(), heldout=heldout,
                             train=train, choice=choice, last=last)
        if not self.main:
            return runner, result, entry
        record_stage(f, result, {
            "config.json": {"values": values, "editable": editable_values(self.space, values)},
            "train.json": {**train, "env_steps": result.env_steps},
            "validation.json": {"split": val.split, "summary": entry.summary,
                                "table": result.validation, "failures": failures.__dict__},
            "heldout.json": {"split": "heldout", "table": heldout},
            "context.json": getattr(self.engineer, "last_prompt", None) or {
                "rendered": self.builder.render(ctx, **self._prompt_fields(ctx)).messages},
            "candidates.json": [{**p.__dict__, "score": sc.to_dict()}
                                for p, sc in zip(proposals, scores)],
            "choice.json": choice},
            save=lambda ckpt: self.trainee.save(ckpt, runner, step=stage),
            stage_steps=self.budget["stage_steps"], headline=self.task.headline)
        self.on_phase(stage, "stage", "end")
        return runner, result, entry
