"""The files of one stage of the closed loop: which repository modules run a function while
`ClosedLoop._stage` runs, in the order each is first called (the order data flows).

A profiler (`sys.setprofile`) records the file of every function called during each stage of
a short run; module bodies (imports done inside a stage) and what they call are left out. The
first stage includes JAX's tracing of the jitted stage, i.e. every function that defines the
computation; a later stage runs from the compiled cache, so it lists what Python itself runs.

    python benchmarks/stage_trace.py                          # the rules engineer, tiny budget
    python benchmarks/stage_trace.py --engineer llm --backend transformers --json out.json
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness import REPO, command, positive_int, write_json

PACKAGES = ("jaxenv", "policy", "designer")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--engineer", default="rules")
    p.add_argument("--backend", default="transformers")
    p.add_argument("--stages", type=positive_int, default=2)
    p.add_argument("--stage-steps", type=positive_int, default=4096)
    p.add_argument("--envs", type=positive_int, default=64)
    p.add_argument("--candidates", type=positive_int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path)
    return p.parse_args(argv)


class FileTrace:
    """The repository files whose functions are called while on, each once, in call order."""

    def __init__(self, root: Path):
        self.prefixes = tuple(f"{root / pkg}/" for pkg in PACKAGES)
        self.files: dict[str, None] = {}
        self.importing = 0  # depth of module bodies being executed (imports)

    def __call__(self, frame: Any, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        code = frame.f_code
        if code.co_name == "<module>":
            self.importing += 1 if event == "call" else -1
        elif event == "call" and not self.importing and code.co_filename.startswith(self.prefixes):
            self.files.setdefault(code.co_filename, None)

    def relative(self, root: Path) -> list[str]:
        return [str(Path(f).relative_to(root)) for f in self.files]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    a = parse(argv)
    from designer.run.loop import ClosedLoop
    from designer.settings import RunSettings

    s = RunSettings(engineer=a.engineer, backend=a.backend, stages=a.stages, seed=a.seed,
                    stage_steps=a.stage_steps, candidates=a.candidates,
                    trainee={"num_envs": a.envs}, verify={"k": a.candidates})
    traces: list[list[str]] = []
    stage = ClosedLoop._stage

    def traced(loop: ClosedLoop, *args: Any, **kw: Any) -> Any:
        trace = FileTrace(REPO)
        sys.setprofile(trace)
        try:
            return stage(loop, *args, **kw)
        finally:
            sys.setprofile(None)
            traces.append(trace.relative(REPO))

    ClosedLoop._stage = traced
    with tempfile.TemporaryDirectory() as tmp:
        ClosedLoop(s, tmp).run()
    out = {"settings": s.model_dump(mode="json"), "stages": [
        {"stage": k, "files": files, "count": len(files),
         "by_package": {pkg: sum(f.startswith(f"{pkg}/") for f in files) for pkg in PACKAGES}}
        for k, files in enumerate(traces)]}
    for st in out["stages"]:
        print(f"stage {st['stage']}: {st['count']} files {st['by_package']}")
        for f in st["files"]:
            print(f"  {f}")
    write_json(a.json, out, command=command(__file__, argv), seeds=[a.seed])
    return out


if __name__ == "__main__":
    main()
