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

import sys
from collections.abc import Callable

from designer.cli import compare, evaluate, report, run, sweep, tools
from designer.cli.door import CliError, Parser, on_off
from designer.cli.flags import add_run_flags, build_settings, saved_settings, settings_from

__all__ = ["CliError", "Parser", "add_run_flags", "build_settings", "check", "main", "on_off",
           "parser", "saved_settings", "settings_from"]

COMMANDS = ("run", "compare", "eval", "report", "sweep", "demo", "bench")


def parser() -> Parser:
    ap = Parser(prog="envengineer", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", parser_class=Parser)
    for module in (run, compare, evaluate, report, sweep):
        module.add_parser(sub)
    tools.add_parsers(sub)
    return ap


def check(argv: list[str] | None = None) -> Callable[[], int]:
    """Parse and check a command line: the command's work, not started (nothing is created
    before every input has passed), or a `CliError`."""
    args = parser().parse_args(argv)
    if args.cmd is None:
        raise CliError("envengineer: choose a command: " + ", ".join(COMMANDS)
                       + " (--help for each)")
    return args.check(args)


def main(argv: list[str] | None = None) -> int:
    from designer.llm import BackendError
    from designer.run.folder import RunLocked

    try:
        return check(argv)()
    except CliError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (RunLocked, BackendError, OSError, ValueError) as e:
        first = (str(e).splitlines() or [""])[0]
        print(f"error: {first or type(e).__name__}", file=sys.stderr)
        return 2
