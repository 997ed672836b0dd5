"""The `envengineer` command: the closed loop, comparisons, evaluation, reports.

    envengineer run [--engineer llm] [--backend transformers] [--stages 6] [--out runs/x]
    envengineer run --resume runs/x
    envengineer run --trainee llm --engineer rules --stages 2   # the GRPO LLM trainee (CPU)
    envengineer run --distributed --coordinator host:port --num-processes 2 --process-id 0
    envengineer compare --engineers fixed,dr,learnability,mutate,rules,llm --seeds 0,1,2
    envengineer eval runs/x              # the held-out table of a run's last trainee
    envengineer eval --llm --backend transformers --per-cell 2   # an LLM writes whole plans
    envengineer eval --llm --from answers.jsonl                  # its table, no model
    envengineer report runs/a runs/b --out reports/ab
    envengineer demo                     # the environment layer on its own
    envengineer bench                    # the throughput benchmarks (from a source checkout)

A bad argument, a missing or malformed file, an unknown engineer or backend: one line on stderr
and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from designer.settings import BACKENDS, ENGINEERS, RunSettings, upgrade_saved

DEFAULT_OUT = Path("runs")


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + message
        raise CliError(f"{self.prog}: {message}")


# ------------------------------------------------------------------------------ settings
def on_off(v: str) -> bool:
    """A yes/no flag value (on/off, true/false, yes/no, 1/0)."""
    v = v.strip().lower()
    if v in ("on", "true", "yes", "1"):
        return True
    if v in ("off", "false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected on or off, got {v!r}")


RUN_FLAGS: dict[str, tuple[str, Any, str]] = {
    # flag: (settings path, type, help)
    "env": ("env", str, "the environment family: mapf (default), or a control task"),
    "engineer": ("engineer", str, f"one of {', '.join(ENGINEERS)}"),
    "backend": ("backend", str, f"LLM backend: one of {', '.join(BACKENDS)}"),
    "model": ("model", str, "model directory or GGUF file (default: SmolLM2-135M-Instruct)"),
    "base-url": ("base_url", str, "OpenAI-compatible server, e.g. http://localhost:8000/v1"),
    "roles": ("roles", str, "single (one call) or team (analyst, engineer, critic)"),
    "context": ("context", str, "context modules, e.g. F,G,H,T (add S for a self-summary)"),
    "preset": ("preset", str, "paper (2-agent training) or open (agent counts editable)"),
    "candidates": ("candidates", int, "candidates per stage"),
    "stages": ("stages", int, "stages, round 0 included"),
    "stage-steps": ("stage_steps", int, "training env steps per stage"),
    "heldout-every": ("heldout_every", int, "held-out evaluation every k stages (and the last)"),
    "select": ("select", str, "the run's result: validation (the stage with the best "
               "validation score) or last"),
    "seed": ("seed", int, "seed of round 0, training and sampling"),
    "max-size": ("capacity.max_size", int, "largest map side"),
    "max-agents": ("capacity.max_agents", int, "agent slots in training"),
    "view-radius": ("capacity.view_radius", int, "radius of each agent's view"),
    "max-steps": ("capacity.max_steps", int, "longest episode"),
    "cost-to-go": ("capacity.cost_to_go", on_off, "on/off: MAPF agents observe their "
                   "shortest-path distance to the goal and which moves shorten it"),
    "priority": ("capacity.priority", on_off, "on/off: MAPF agents observe which agents in "
                 "view rank above them (a lower slot index)"),
    "intent": ("capacity.intent", on_off, "on/off: MAPF agents observe where the other agents "
               "in view are headed (default on; needs --cost-to-go on)"),
    "envs": ("trainee.num_envs", int, "parallel environments"),
    "pool-every": ("trainee.pool_every", int, "a fresh pool of levels every this many PPO "
                   "updates (0: one pool a stage)"),
    "hidden": ("trainee.hidden", int, "width of the actor-critic"),
    "lr": ("trainee.lr", float, "Adam learning rate of the trainee"),
    "lr-schedule": ("trainee.lr_schedule", str, "constant, or linear: decays to 0 over the "
                    "run's stages"),
    "critic": ("trainee.critic", str, "ippo (per-agent value) or mappo (central critic)"),
    "mixer": ("trainee.mixer", str, "none, or attention (agents see each other)"),
    "gamma": ("trainee.gamma", float, "discount of the PPO returns"),
    "gae-lambda": ("trainee.gae_lambda", float, "GAE's lambda (MAPF default 0.99, control 0.95)"),
    "reward-scale": ("trainee.reward_scale", float, "rewards x this for learning only"),
    "obs-norm": ("trainee.obs_norm", on_off, "on/off: running observation normalisation "
                 "(default on for the Brax families)"),
    "goal-rule": ("task.goal_rule", str, "plan (default: an episode is a whole plan) or freeze"),
    "soc-cost": ("task.soc_cost", float, "reward weight of the verifier's sum of costs"),
    "makespan-cost": ("task.makespan_cost", float, "reward weight of the verifier's makespan"),
    "conflict-penalty": ("task.conflict_penalty", float, "paid by an agent that breaks a rule "
                         "(default 0; 0.02-1 stalled learning, docs/trainee.md)"),
    "verify-k": ("verify.k", int, "candidates per verification call"),
    "verify-episodes": ("verify.episodes", int, "fresh levels per candidate"),
    "verify-signal": ("verify.signal", str, "what verification's p is: success (share of "
                      "successful episodes) or return (mean normalised return, graded); "
                      "default: return for the control families, success for mapf"),
    "guidelines": ("guidelines", str, "guidelines file (G) replacing the shipped one"),
    "token-budget": ("token_budget", int, "prompt token budget"),
    "max-tokens": ("max_tokens", int, "tokens per LLM reply"),
    "trainee": ("trainee_kind", str, "who learns: ppo (default) or llm (whole plans, GRPO)"),
    "llm-model": ("llm.model", str, "the LLM trainee's model folder or GGUF (default: "
                  "SmolLM2-135M-Instruct)"),
    "llm-steps": ("llm.steps", int, "GRPO updates per stage (llm trainee)"),
    "llm-group": ("llm.group", int, "samples per prompt, GRPO's G (llm trainee)"),
    "llm-prompts": ("llm.prompts_per_step", int, "prompts per GRPO update (llm trainee)"),
    "llm-tokens": ("llm.max_new_tokens", int, "reply length cap in training (llm trainee)"),
    "llm-lora-rank": ("llm.lora_rank", int, "LoRA rank, 0 = full fine-tune (llm trainee)"),
    "llm-sft-steps": ("llm.sft_steps", int, "warm-start steps on optimal plans, 0 = off"),
    "llm-val-per-cell": ("llm.validation_per_cell", int, "validation instances per agents x "
                         "size cell (llm trainee)"),
    "llm-heldout-per-cell": ("llm.heldout_per_cell", int, "held-out instances per cell "
                             "(llm trainee)"),
    "llm-eval-tokens": ("llm.eval_max_new_tokens", int, "reply length cap when validating "
                        "and verifying (llm trainee)"),
    "llm-verify-levels": ("llm.verify_levels", int, "fresh levels per candidate in "
                          "verification (llm trainee)"),
    "learn": ("learn.enabled", bool, "the llm engineer learns from verification (GRPO on a "
              "LoRA of its model; transformers backend)"),
    "learn-from": ("learn.source", str, "start the learning engineer from a saved adapter"),
    "learn-lr": ("learn.lr", float, "learning rate of the learning engineer"),
}


def command_line() -> str:
    """The command as the user typed it, without the interpreter's or script's path."""
    return " ".join(["envengineer", *sys.argv[1:]])


def add_run_flags(p: argparse.ArgumentParser) -> None:
    for flag, (_, typ, helptext) in RUN_FLAGS.items():
        if typ is bool:  # a switch
            p.add_argument(f"--{flag}", action="store_const", const=True, default=None,
                           help=helptext)
        else:
            p.add_argument(f"--{flag}", type=typ, default=None, help=helptext)
    p.add_argument("--settings", type=Path, help="a JSON, TOML or YAML file of run settings "
                   "(flags override it)")


def read_settings_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise CliError(f"settings file {path} not found")
    text = path.read_text()
    try:
        if path.suffix == ".toml":
            import tomllib

            return tomllib.loads(text)
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as e:  # any parser's error is the user's malformed file
        raise CliError(f"settings file {path} is malformed: {str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise CliError(f"settings file {path} must hold a mapping of settings")
    return data


def build_settings(args: argparse.Namespace, base: dict[str, Any] | None = None) -> RunSettings:
    data: dict[str, Any] = dict(base or {})
    if getattr(args, "settings", None):
        data.update(read_settings_file(args.settings))
    for flag, (path, _, _) in RUN_FLAGS.items():
        v = getattr(args, flag.replace("-", "_"), None)
        if v is None:
            continue
        *parents, leaf = path.split(".")
        d = data
        for part in parents:
            d = d.setdefault(part, {})
        d[leaf] = v
    return settings_from(data)


def settings_from(data: dict[str, Any]) -> RunSettings:
    from pydantic import ValidationError

    try:
        return RunSettings.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "settings"
        raise CliError(f"bad value for {where}: {err['msg']}") from None


# ------------------------------------------------------------------------------ progress
class StageProgress:
    """rich progress: a bar over the stages and one line naming the phase under way."""

    NAMES = {"train": "training", "validate": "validation split", "heldout": "held-out eval",
             "propose": "engineer (LLM calls)", "verify": "verification"}

    def __init__(self, stages: int, title: str):
        from rich import progress as rp

        self.progress = rp.Progress(rp.SpinnerColumn(), rp.TextColumn("{task.description}"),
                                    rp.BarColumn(), rp.TextColumn("{task.completed}/{task.total}"),
                                    rp.TimeElapsedColumn())
        self.bar = self.progress.add_task(title, total=stages)
        self.phase = self.progress.add_task("  starting", total=None)

    def __enter__(self) -> StageProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.update(self.phase, description="  done", total=1, completed=1)
        self.progress.__exit__(*exc)

    def __call__(self, stage: int, phase: str, what: str) -> None:
        if phase == "stage":
            self.progress.update(self.bar, completed=stage + 1)
        elif what == "start":
            self.progress.update(self.phase, description=f"  stage {stage}: {self.NAMES[phase]}")

    def stage_done(self, completed: int) -> None:
        self.progress.update(self.bar, completed=completed)


# -------------------------------------------------------------------------- commands
def print_table(results: list[Any], title: str, selection: dict[str, Any] | None = None
                ) -> None:
    """The run's held-out numbers: its result (the stage `selection` chose) and, where that
    is not the last stage, the last stage's too."""
    from rich.console import Console
    from rich.table import Table

    last = len(results) - 1
    final = next((r.heldout for r in reversed(results) if r.heldout), None)
    rows = [(f"final stage {last}", final)]
    if selection and selection["stage"] != last:
        rows.insert(0, (f"stage {selection['stage']}, chosen on validation",
                        selection["heldout"]))
    rows = [(what, table) for what, table in rows if table]
    t = Table(title=title)
    if final and "mean_over_sizes" not in final:  # a control family: the robustness numbers
        t.add_column("held-out set")
        t.add_column("success %")
        t.add_column("normalised return")
        for what, h in rows:
            t.add_row(f"{h['family']} ({h['n']} variants, {what})", f"{h['success']:.1f}",
                      f"{h['normalized_return']:.3f}")
        Console().print(t)
        return
    t.add_column("model")
    for k in ("3", "4", "5"):
        t.add_column(f"{k} agents (valid / optimal %)")
    from designer.report import PAPER

    for name, cells in PAPER.items():
        t.add_row(name, *[f"{v:.2f} / {o:.2f}" for v, o in cells])
    for what, h in rows:
        m = h["mean_over_sizes"]
        t.add_row(f"this run (held-out split, {what})",
                  *[f"{m[k]['valid']:.2f} / {m[k]['optimal']:.2f}" if k in m else "-"
                    for k in ("3", "4", "5")])
    Console().print(t)


def run_one(settings: RunSettings, out: Path, *, processes: Any = None) -> list[Any]:
    from designer.loop import ClosedLoop

    if settings.learn.enabled:
        from policy.llm.engineer_rl import prefer_memory_schedule

        prefer_memory_schedule()
    loop = ClosedLoop(settings, out, processes=processes)
    if not loop.main:
        return loop.run()
    done = len(loop.folder.finished_stages())
    with StageProgress(settings.stages, f"{settings.engineer} seed {settings.seed}") as prog:
        prog.stage_done(done)
        loop.on_phase = prog
        results = loop.run()
        prog.stage_done(len(results))
    return results


def saved_settings(run_json: Path) -> RunSettings:
    """The settings a run folder was started with. Runs saved before an option existed ran
    without it (`designer.settings.upgrade_saved`: `capacity.cost_to_go`, default on since, is
    off where run.json lacks it), so a resumed run rebuilds the network it trained."""
    return settings_from(upgrade_saved(json.loads(run_json.read_text())["settings"]))


def cmd_run(args: argparse.Namespace) -> int:
    from designer.report import write_report
    from designer.runfolder import RunFolder

    if args.resume:
        run_json = args.resume / "run.json"
        if not run_json.is_file():
            raise CliError(f"--resume {args.resume}: not a run folder (no run.json)")
        settings = saved_settings(run_json)
        out = args.resume
    else:
        settings = build_settings(args)
        out = args.out or DEFAULT_OUT / time.strftime(f"%Y%m%d-%H%M%S-{settings.engineer}")
        if (out / "run.json").exists():
            raise CliError(f"{out} already holds a run: use --resume {out} or another --out")
    processes = None
    if args.distributed:
        from policy.distributed import initialize

        processes = initialize(args.coordinator, args.num_processes, args.process_id,
                               cpu_devices=args.cpu_devices)
    t0 = time.perf_counter()
    results = run_one(settings, out, processes=processes)
    if processes is not None and not processes.is_main:
        return 0
    report = write_report([out], out, title=f"Run {out}", command=command_line())
    print_table(results, f"{settings.engineer}: {len(results)} stages, "
                         f"{results[-1].env_steps:,} env steps, {time.perf_counter() - t0:.0f}s",
                RunFolder(out).selection())
    print(f"report: {report}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from designer.report import write_report

    engineers = [e.strip() for e in args.engineers.split(",") if e.strip()]
    bad = [e for e in engineers if e not in ENGINEERS]
    if bad:
        raise CliError(f"unknown engineer(s) {bad} (known: {', '.join(ENGINEERS)})")
    try:
        seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    except ValueError:
        raise CliError(f"--seeds must be integers separated by commas, got {args.seeds!r}") \
            from None
    out = args.out or DEFAULT_OUT / "compare"
    dirs = []
    t0 = time.perf_counter()
    for eng in engineers:
        for seed in seeds:
            s = build_settings(args).model_copy(update={"engineer": eng, "seed": seed})
            d = out / eng / f"seed{seed}"
            if (d / "run.json").exists():
                old = saved_settings(d / "run.json")
                if old != s:
                    raise CliError(f"{d} holds a run with other settings; use another --out")
            run_one(s, d)
            dirs.append(d)
    report = write_report(dirs, out, title="Engineers compared at equal budget",
                          command=command_line())
    print(f"{len(dirs)} runs in {time.perf_counter() - t0:.0f}s; report: {report}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    if args.llm or args.from_answers is not None:
        if args.run is not None:
            raise CliError("eval --llm takes no run folder (its answers file: --answers)")
        return cmd_eval_llm(args)
    if args.run is None:
        raise CliError("eval: give a run folder, or --llm for an LLM's whole plans")
    import jax

    from designer.loop import ClosedLoop

    run_json = args.run / "run.json"
    if not run_json.is_file():
        raise CliError(f"{args.run} is not a run folder (no run.json)")
    settings = saved_settings(run_json)
    loop = ClosedLoop(settings.model_copy(update={"engineer": "fixed"}), args.run)
    done = loop.folder.finished_stages()
    if not done:
        raise CliError(f"{args.run} has no finished stage with a checkpoint")
    sel = loop.folder.selection()
    chosen = sel["stage"] if sel else done[-1]
    stage = chosen if args.stage is None else args.stage
    if stage not in done:
        raise CliError(f"stage {stage} is not finished in {args.run} (finished: {done})")
    state = loop.trainee.restore(loop.folder.stage_dir(stage) / "ckpt",
                                 loop.trainee.init(jax.random.PRNGKey(0)))
    v = loop.trainee.evaluate_split(state, loop.heldout, jax.random.PRNGKey(3))
    print(loop.task.markdown(v.table, f"{args.run}, stage {stage}: held-out split"))
    return 0


def llm_backend(args: argparse.Namespace) -> Any:
    """The backend `eval --llm` asks (logged into --call-log when given)."""
    from designer.backends import LoggedBackend, make_backend
    from designer.calllog import CallLog

    if args.backend == "openai":
        if not args.base_url:
            raise CliError("--backend openai needs --base-url (e.g. http://localhost:8000/v1)")
        options: dict[str, Any] = {"base_url": args.base_url, "model": args.model}
    elif args.backend == "replay":
        if not args.model:
            raise CliError("--backend replay needs --model PATH (the call log to replay)")
        options = {"log_path": args.model}
    else:
        options = {"model": args.model}
        if args.backend == "transformers" and args.threads is not None:
            options["threads"] = args.threads
    backend = make_backend(args.backend, **{k: v for k, v in options.items() if v is not None})
    return LoggedBackend(backend, CallLog(args.call_log)) if args.call_log else backend


def cmd_eval_llm(args: argparse.Namespace) -> int:
    """`eval --llm`: an LLM writes whole plans for a split's instances; the paper's table."""
    from designer import plan_eval
    from designer.answer_log import AnswerLog
    from designer.backends import NAMES, BackendError

    if args.from_answers is not None:
        if not args.from_answers.is_file():
            raise CliError(f"--from {args.from_answers}: no such answers file")
        answers = AnswerLog(args.from_answers)
    else:
        if args.backend not in NAMES:
            raise CliError(f"unknown backend {args.backend!r} (known: {', '.join(NAMES)})")
        mode = "json" if args.constrained else "text"
        path = args.answers or DEFAULT_OUT / "llm-eval" / f"{args.backend}-{mode}.jsonl"
        answers = AnswerLog(path)
        try:
            backend = llm_backend(args)
            with EvalProgress(path) as prog:
                counts = plan_eval.ask(backend, answers, split=args.split, mode=mode,
                                       limit=args.limit, per_cell=args.per_cell,
                                       max_tokens=args.max_tokens, seed=args.seed,
                                       model=args.model, progress=prog)
        except BackendError as e:
            raise CliError(f"backend {args.backend}: {str(e).splitlines()[0]}") from None
        print(f"answers: {path} ({counts['selected']} selected, {counts['had']} answered "
              f"before, {counts['asked']} asked now, {counts['errors']} backend errors)",
              file=sys.stderr)
    result = plan_eval.score(answers, cost=args.cost)
    text = plan_eval.markdown(result)
    print(text)
    if args.table:
        args.table.parent.mkdir(parents=True, exist_ok=True)
        args.table.write_text(text + "\n")
        print(f"table: {args.table}", file=sys.stderr)
    return 0


class EvalProgress:
    """rich progress over the instances, with the last reply's tokens and seconds."""

    def __init__(self, path: Path):
        from rich import progress as rp
        from rich.console import Console

        self.progress = rp.Progress(rp.TextColumn("{task.description}"), rp.BarColumn(),
                                    rp.TextColumn("{task.completed}/{task.total}"),
                                    rp.TimeElapsedColumn(), rp.TimeRemainingColumn(),
                                    console=Console(stderr=True))
        self.plain = not self.progress.console.is_terminal  # a log file: one line per answer
        self.task = self.progress.add_task(f"whole plans -> {path.name}", total=None)

    def __enter__(self) -> EvalProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)

    def __call__(self, done: int, total: int, rec: dict[str, Any]) -> None:
        if self.plain:
            print(f"[{done}/{total}] id {rec['id']}: {rec['agents']} agents "
                  f"{rec['size']}x{rec['size']}, {rec['completion_tokens']} tokens in "
                  f"{rec['seconds']:.1f}s", file=sys.stderr, flush=True)
        self.progress.update(self.task, completed=done, total=total, description=(
            f"whole plans: {rec['agents']} agents {rec['size']}x{rec['size']}, "
            f"{rec['completion_tokens']} tokens in {rec['seconds']:.1f}s"))


def cmd_report(args: argparse.Namespace) -> int:
    from designer.report import write_report

    for d in args.runs:
        if not (d / "run.json").is_file():
            raise CliError(f"{d} is not a run folder (no run.json)")
    out = args.out or args.runs[0]
    print(f"report: {write_report(args.runs, out, command=command_line())}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from designer import sweep

    for flag, v, low in (("retries", args.retries, 0), ("cpus-per-trial", args.cpus_per_trial,
                         1e-3), ("gpus-per-trial", args.gpus_per_trial, 0),
                         ("llm-concurrency", args.llm_concurrency, 1)):
        if v < low:
            raise CliError(f"--{flag} must be at least {low:g}, got {v:g}")
    flags = {k: v for k in ("backend", "base_url", "model")
             if (v := getattr(args, k)) is not None}
    try:
        spec = sweep.load_spec(args.spec)
        try:
            trials = sweep.expand(spec, flags)
        except sweep.SweepError as e:
            raise CliError(f"spec {args.spec}: {e}") from None
        out = args.out or DEFAULT_OUT / "sweeps" / (spec.name or args.spec.stem)
        states = sweep.plan(trials, out)
        if args.dry_run:
            for t in trials:
                print(f"{t.name}\t{states[t.name]}\t{json.dumps(t.overrides)}")
            print(f"{len(trials)} trials in {out}")
            return 0
        opts = sweep.Options(out=out, address=args.address, cpus_per_trial=args.cpus_per_trial,
                             gpus_per_trial=args.gpus_per_trial, retries=args.retries,
                             llm_concurrency=args.llm_concurrency, command=command_line())
        summary = sweep.run_sweep(spec, trials, opts)
    except sweep.SweepError as e:
        raise CliError(str(e)) from None
    print(f"{len(summary.rows) - len(summary.failed)}/{len(summary.rows)} trials finished in "
          f"{summary.wall_s:.0f}s; report: {summary.report}; results: {summary.results}")
    for r in summary.failed:
        print(f"failed: {r['trial']}: {r['error']}", file=sys.stderr)
    return 1 if summary.failed else 0


def cmd_demo(args: argparse.Namespace) -> int:
    from designer.demo import demo

    demo(args.levels, args.envs, args.steps, args.seed)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    root = Path(__file__).resolve().parents[1] / "benchmarks"
    if not root.is_dir():
        raise CliError("the benchmarks live in the source checkout (benchmarks/); run this "
                       "from a clone of the repository")
    scripts = {"env": "env_throughput.py", "train": "train_throughput.py",
               "verify": "verify_throughput.py", "engineer": "engineer_latency.py"}
    for name in args.which.split(","):
        if name not in scripts:
            raise CliError(f"unknown benchmark {name!r} (known: {', '.join(scripts)})")
        cmd = [sys.executable, str(root / scripts[name])] + (["--quick"] if args.quick else [])
        print("$ " + " ".join(cmd), flush=True)
        rc = subprocess.run(cmd, env=dict(os.environ)).returncode
        if rc:
            return rc
    return 0


def parser() -> Parser:
    ap = Parser(prog="envengineer", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", parser_class=Parser)
    r = sub.add_parser("run", help="one closed-loop run (train, validate, redesign, verify)")
    add_run_flags(r)
    r.add_argument("--out", type=Path, help="run folder (default: runs/<time>-<engineer>)")
    r.add_argument("--resume", type=Path, help="continue the run in this folder")
    r.add_argument("--distributed", action="store_true", help="one training job over many "
                   "processes (jax.distributed); start the command once per process")
    r.add_argument("--coordinator", help="coordinator host:port (or JAX_COORDINATOR_ADDRESS)")
    r.add_argument("--num-processes", type=int, help="processes in the job (or "
                   "JAX_NUM_PROCESSES)")
    r.add_argument("--process-id", type=int, help="this process (or JAX_PROCESS_ID)")
    r.add_argument("--cpu-devices", type=int, help="host CPU devices of this process "
                   "(to try a multi-device job on one machine)")
    c = sub.add_parser("compare", help="engineers x seeds at equal budget, then report.md")
    add_run_flags(c)
    c.add_argument("--engineers", default=",".join(e for e in ENGINEERS if e != "self"),
                   help="comma-separated (self needs --trainee llm)")
    c.add_argument("--seeds", default="0,1,2", help="comma-separated integers")
    c.add_argument("--out", type=Path, help="folder of the runs and the report")
    e = sub.add_parser("eval", help="the held-out table of a run's trainee, or of an LLM "
                       "writing whole plans (--llm)")
    e.add_argument("run", type=Path, nargs="?", help="a run folder (not with --llm)")
    e.add_argument("--stage", type=int, help="which finished stage (default: the run's result, "
                   "selected.json; else the last)")
    e.add_argument("--llm", action="store_true", help="an LLM writes every agent's whole plan "
                   "for each instance (the paper's trainee setting; docs/llm_trainee.md)")
    e.add_argument("--backend", default="transformers", help="LLM backend (--llm)")
    e.add_argument("--model", help="model directory, GGUF file or served name; the call log "
                   "for --backend replay (default: SmolLM2-135M-Instruct)")
    e.add_argument("--base-url", help="OpenAI-compatible server (--backend openai)")
    e.add_argument("--threads", type=int, help="torch threads (--backend transformers)")
    e.add_argument("--answers", type=Path, help="the answers file, appended to and resumed "
                   "(default: runs/llm-eval/<backend>-<mode>.jsonl)")
    e.add_argument("--from", dest="from_answers", type=Path, help="only the table of a "
                   "finished answers file (no model)")
    e.add_argument("--constrained", action="store_true", help="JSON-schema constrained "
                   "replies instead of free text")
    e.add_argument("--split", default="heldout", help="heldout (default) or validation")
    e.add_argument("--limit", type=int, help="at most N instances (a prefix of the "
                   "stratified order)")
    e.add_argument("--per-cell", type=int, help="N instances per agents x size cell")
    e.add_argument("--max-tokens", type=int, default=1024, help="tokens per reply")
    e.add_argument("--seed", type=int, default=0, help="sampling seed (plus the instance id)"
                   " and the order's shuffle")
    e.add_argument("--cost", default="makespan", choices=("makespan", "soc"),
                   help="the cost 'optimal' is judged by")
    e.add_argument("--table", type=Path, help="also write the markdown table here")
    e.add_argument("--call-log", type=Path, help="log every LLM call here (replayable with "
                   "--backend replay --model PATH)")
    rp = sub.add_parser("report", help="rebuild report.md and plots from run folders")
    rp.add_argument("runs", type=Path, nargs="+", help="run folders")
    rp.add_argument("--out", type=Path, help="where to write (default: the first run folder)")
    sw = sub.add_parser("sweep", help="many runs from a SPEC file (grid, random draws) on Ray")
    sw.add_argument("spec", type=Path, help="a YAML or TOML sweep spec (docs/sweeps.md)")
    sw.add_argument("--out", type=Path, help="sweep folder (default: runs/sweeps/<spec name>)")
    sw.add_argument("--address", help="join this Ray cluster (default: a local one, no setup)")
    sw.add_argument("--cpus-per-trial", type=float, default=1.0, help="Ray CPUs per trial")
    sw.add_argument("--gpus-per-trial", type=float, default=0.0, help="Ray GPUs per trial")
    sw.add_argument("--retries", type=int, default=2, help="retries of a killed or crashed "
                    "trial (each resumes from its run folder)")
    sw.add_argument("--llm-concurrency", type=int, default=4, help="most trials calling the "
                    "shared LLM server (engineer llm, backend openai) at once")
    sw.add_argument("--backend", help="LLM backend for every trial, e.g. openai")
    sw.add_argument("--base-url", help="shared OpenAI-compatible server for every trial")
    sw.add_argument("--model", help="model name or path for every trial")
    sw.add_argument("--dry-run", action="store_true", help="validate, list the trials, exit")
    d = sub.add_parser("demo", help="environment demo on the embedded default config")
    d.add_argument("--levels", type=int, default=512, help="levels to generate")
    d.add_argument("--envs", type=int, default=1024, help="parallel environments")
    d.add_argument("--steps", type=int, default=64, help="steps per environment")
    d.add_argument("--seed", type=int, default=0)
    b = sub.add_parser("bench", help="throughput benchmarks (source checkout)")
    b.add_argument("--which", default="env,train,verify", help="comma-separated")
    b.add_argument("--quick", action="store_true")
    return ap


COMMANDS = {"run": cmd_run, "compare": cmd_compare, "eval": cmd_eval, "report": cmd_report,
            "sweep": cmd_sweep, "demo": cmd_demo, "bench": cmd_bench}


def main(argv: list[str] | None = None) -> int:
    from designer.runfolder import RunLocked

    try:
        args = parser().parse_args(argv)
        if args.cmd is None:
            raise CliError("envengineer: choose a command: " + ", ".join(COMMANDS)
                           + " (--help for each)")
        return COMMANDS[args.cmd](args)
    except CliError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (RunLocked, FileNotFoundError, ValueError) as e:
        print(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
