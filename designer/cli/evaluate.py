"""`envengineer eval`: the held-out table of a run's trainee, or of an LLM writing whole plans
(`--llm`, or `--from` a finished answers file). Every path and number is checked before an
answers file, table or call log is written or a model is loaded.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from designer.cli.door import (
    DEFAULT_OUT,
    CliError,
    bounded,
    existing_file,
    http_url,
    run_folder,
    writable_file,
)
from designer.cli.flags import saved_settings
from designer.llm import NAMES as BACKENDS
from designer.stage_settings import SEED_LIMIT


def add_parser(sub: Any) -> None:
    e = sub.add_parser("eval", help="the held-out table of a run's trainee, or of an LLM "
                       "writing whole plans (--llm)")
    e.add_argument("run", type=Path, nargs="?", help="a run folder (not with --llm)")
    e.add_argument("--stage", type=bounded(int, 0, 10**6), help="which finished stage "
                   "(default: the run's result, selected.json; else the last)")
    e.add_argument("--llm", action="store_true", help="an LLM writes every agent's whole plan "
                   "for each instance (the paper's trainee setting; docs/llm_trainee.md)")
    e.add_argument("--backend", default="transformers", help="LLM backend (--llm): one of "
                   + ", ".join(BACKENDS))
    e.add_argument("--model", help="model directory, GGUF file or served name; the call log "
                   "for --backend replay (default: SmolLM2-135M-Instruct)")
    e.add_argument("--base-url", type=http_url, help="OpenAI-compatible server "
                   "(--backend openai)")
    e.add_argument("--threads", type=bounded(int, 1, 1024), help="torch threads "
                   "(--backend transformers)")
    e.add_argument("--answers", type=Path, help="the answers file, appended to and resumed "
                   "(default: runs/llm-eval/<backend>-<mode>.jsonl)")
    e.add_argument("--from", dest="from_answers", type=Path, help="only the table of a "
                   "finished answers file (no model)")
    e.add_argument("--constrained", action="store_true", help="JSON-schema constrained "
                   "replies instead of free text")
    e.add_argument("--split", default="heldout", choices=("heldout", "validation"),
                   help="heldout (default) or validation")
    e.add_argument("--limit", type=bounded(int, 1, 10**6), help="at most N instances (a prefix "
                   "of the stratified order)")
    e.add_argument("--per-cell", type=bounded(int, 1, 10**6), help="N instances per agents x "
                   "size cell")
    e.add_argument("--max-tokens", type=bounded(int, 1, 65536), default=1024,
                   help="tokens per reply")
    e.add_argument("--seed", type=bounded(int, 0, SEED_LIMIT - 1), default=0,
                   help="sampling seed (plus the instance id) and the order's shuffle")
    e.add_argument("--cost", default="makespan", choices=("makespan", "soc"),
                   help="the cost 'optimal' is judged by")
    e.add_argument("--table", type=Path, help="also write the markdown table here")
    e.add_argument("--call-log", type=Path, help="log every LLM call here (replayable with "
                   "--backend replay --model PATH)")
    e.set_defaults(check=check)


def check(args: argparse.Namespace) -> Callable[[], int]:
    """A run folder's table, or an LLM's (nothing is written before the checks pass)."""
    if args.table is not None:
        writable_file(args.table, "--table")
    if args.llm or args.from_answers is not None:
        if args.run is not None:
            raise CliError("eval --llm takes no run folder (its answers file: --answers)")
        return check_llm(args)
    if args.run is None:
        raise CliError("eval: give a run folder, or --llm for an LLM's whole plans")
    from designer.run.folder import RunFolder

    run_folder(args.run, "eval")
    settings = saved_settings(args.run / "run.json")
    RunFolder(args.run).verify()
    return lambda: evaluate_run(args, settings)


def evaluate_run(args: argparse.Namespace, settings: Any) -> int:
    """The held-out table of one finished stage of a run (its result by default)."""
    import jax

    from designer.run.loop import ClosedLoop

    loop = ClosedLoop(settings.model_copy(update={"engineer": "fixed"}), args.run)
    done = loop.folder.finished_stages()
    if not done:
        raise CliError(f"{args.run} has no finished stage with a checkpoint")
    sel = loop.folder.selection()
    chosen = sel["stage"] if sel else done[-1]
    stage = chosen if args.stage is None else args.stage
    if stage not in done:
        raise CliError(f"stage {stage} is not finished in {args.run} (finished: {done})")
    state = loop.restore(stage, loop.trainee.init(jax.random.PRNGKey(0)))
    v = loop.trainee.evaluate_split(state, loop.heldout, jax.random.PRNGKey(3))
    print(loop.task.markdown(v.table, f"{args.run}, stage {stage}: held-out split"))
    return 0


def check_llm(args: argparse.Namespace) -> Callable[[], int]:
    """`eval --llm`: an LLM writes whole plans for a split's instances; the paper's table."""
    if args.from_answers is not None:
        existing_file(args.from_answers, "--from", "answers file")
        return lambda: table(args, args.from_answers)
    if args.backend not in BACKENDS:
        raise CliError(f"unknown backend {args.backend!r} (known: {', '.join(BACKENDS)})")
    if args.backend == "openai" and not args.base_url:
        raise CliError("--backend openai needs --base-url (e.g. http://localhost:8000/v1)")
    if args.backend == "replay":
        if not args.model:
            raise CliError("--backend replay needs --model PATH (the call log to replay)")
        existing_file(Path(args.model), "--model", "call log")
    mode = "json" if args.constrained else "text"
    path = args.answers or DEFAULT_OUT / "llm-eval" / f"{args.backend}-{mode}.jsonl"
    writable_file(path, "--answers")
    if args.call_log is not None:
        writable_file(args.call_log, "--call-log")
    return lambda: ask(args, path, mode)


def llm_backend(args: argparse.Namespace) -> Any:
    """The backend `eval --llm` asks (logged into --call-log when given)."""
    from designer.llm import LoggedBackend, make_backend
    from designer.llm.calllog import CallLog

    if args.backend == "openai":
        options: dict[str, Any] = {"base_url": args.base_url, "model": args.model}
    elif args.backend == "replay":
        options = {"log_path": args.model}
    else:
        options = {"model": args.model}
        if args.backend == "transformers" and args.threads is not None:
            options["threads"] = args.threads
    backend = make_backend(args.backend, **{k: v for k, v in options.items() if v is not None})
    return LoggedBackend(backend, CallLog(args.call_log)) if args.call_log else backend


def ask(args: argparse.Namespace, path: Path, mode: str) -> int:
    """Ask the LLM for every selected instance not answered yet, then print the table."""
    from designer.llm import BackendError
    from designer.tasks.mapf.plans import evaluate as plan_eval
    from designer.tasks.mapf.plans.answer_log import AnswerLog

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
    return table(args, path)


def table(args: argparse.Namespace, path: Path) -> int:
    """The paper's table of an answers file (printed, and written to --table)."""
    from designer.tasks.mapf.plans import evaluate as plan_eval
    from designer.tasks.mapf.plans.answer_log import AnswerLog

    result = plan_eval.evaluate(AnswerLog(path), cost=args.cost)
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
