"""The import graph of jaxenv, policy and designer keeps its layers and has no cycles.

The graph is read with `ast` from the source (module-level and function-level imports, so a
lazy import counts like any other) and checked against rules, not against a list of files:
- no cycle between modules;
- layers: jaxenv < policy < designer (no module imports a later layer);
- a family is a subpackage of jaxenv (jaxenv.mapf, jaxenv.control, ...): jaxenv's generic
  modules import no family, policy imports no family, a family imports no other family;
- designer imports a family only from its task folder, `designer.tasks.<family>`, which imports
  its own family only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
LAYERS = ("jaxenv", "policy", "designer")

Graph = dict[str, set[str]]


def module_names(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of `packages` under `root`."""
    out = {}
    for pkg in packages:
        for f in sorted((root / pkg).rglob("*.py")):
            parts = list(f.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = f
    return out


def _resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    """The deepest known module that `name` (a module or a name inside one) lies in."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


def imports_of(module: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The known modules that `module` imports anywhere in its source."""
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: len(module.split(".")) - node.level + is_pkg]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names] if base else []
        else:
            continue
        for n in names:
            target = _resolve(n, modules)
            if target is not None and target != module:
                out.add(target)
    return out


def build_graph(root: Path = ROOT, packages: Iterable[str] = LAYERS) -> Graph:
    modules = module_names(root, packages)
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def family_of(module: str, families: Iterable[str]) -> str | None:
    for f in families:
        if module == f"jaxenv.{f}" or module.startswith(f"jaxenv.{f}."):
            return f
    return None


def families_in(graph: Mapping[str, set[str]]) -> tuple[str, ...]:
    """The families: every subpackage jaxenv.X (a module jaxenv.X with modules below it)."""
    names = {m.split(".")[1] for m in graph if m.startswith("jaxenv.") and m.count(".") >= 2}
    return tuple(sorted(n for n in names if f"jaxenv.{n}" in graph))


def task_family(module: str) -> str | None:
    """`designer.tasks.<family>[...]` -> family (None for other modules and tasks' own base)."""
    parts = module.split(".")
    return parts[2] if len(parts) >= 3 and parts[:2] == ["designer", "tasks"] else None


def violations(graph: Mapping[str, set[str]], layers: tuple[str, ...] = LAYERS,
               families: tuple[str, ...] | None = None) -> list[str]:
    """Every import that breaks a rule of the module docstring, as 'a -> b: why'."""
    fams = families_in(graph) if families is None else families
    rank = {name: i for i, name in enumerate(layers)}
    out = []
    for a in sorted(graph):
        for b in sorted(graph[a]):
            la, lb = a.split(".")[0], b.split(".")[0]
            if la in rank and lb in rank and rank[lb] > rank[la]:
                out.append(f"{a} -> {b}: {la} is below {lb}")
            fb = family_of(b, fams)
            if fb is None:
                continue
            fa = family_of(a, fams)
            if la == "jaxenv" and fa is None:
                out.append(f"{a} -> {b}: jaxenv's generic layer imports a family")
            elif la == "jaxenv" and fa != fb:
                out.append(f"{a} -> {b}: a family imports another family")
            elif la == "policy":
                out.append(f"{a} -> {b}: policy imports a family")
            elif la == "designer" and task_family(a) != fb:
                out.append(f"{a} -> {b}: designer imports a family outside its task folder "
                           f"(designer.tasks.{fb})")
    return out


def test_no_import_cycles():
    assert cycles(build_graph()) == []


def test_no_upward_or_family_arrows():
    assert violations(build_graph()) == []


def test_graph_reads_function_level_and_relative_imports(tmp_path):
    pkg = tmp_path / "jaxenv"
    (pkg / "mapf").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mapf" / "__init__.py").write_text("from .env import Env\n")
    (pkg / "mapf" / "env.py").write_text("def f():\n    from jaxenv import levels\n")
    (pkg / "levels.py").write_text("import jaxenv.mapf.env as e\n")
    graph = build_graph(tmp_path, ["jaxenv"])
    assert graph["jaxenv.mapf"] == {"jaxenv.mapf.env"}
    assert graph["jaxenv.mapf.env"] == {"jaxenv.levels"}
    assert graph["jaxenv.levels"] == {"jaxenv.mapf.env"}
    assert cycles(graph) == [["jaxenv.levels", "jaxenv.mapf.env"]]
    assert violations(graph) == ["jaxenv.levels -> jaxenv.mapf.env: jaxenv's generic layer "
                                 "imports a family"]


def test_checker_catches_planted_cycle_and_arrows():
    graph: Graph = {
        "jaxenv": set(), "jaxenv.levels": set(), "jaxenv.mapf": set(),
        "jaxenv.mapf.env": {"jaxenv.levels"}, "jaxenv.control": set(),
        "jaxenv.control.cartpole": {"jaxenv.mapf.env"},
        "policy.ppo": {"jaxenv.levels", "designer.run.loop"},
        "policy.llm.reward": {"jaxenv.mapf.env"},
        "designer.run.loop": {"designer.report", "policy.ppo"},
        "designer.report": {"designer.run.loop", "jaxenv.control.cartpole"},
        "designer.tasks": set(),
        "designer.tasks.mapf.failures": {"jaxenv.mapf.env"},
        "designer.tasks.control": {"jaxenv.mapf.env"},
    }
    assert families_in(graph) == ("control", "mapf")
    assert cycles(graph) == [["designer.report", "designer.run.loop", "policy.ppo"]]
    assert violations(graph) == [
        "designer.report -> jaxenv.control.cartpole: designer imports a family outside its "
        "task folder (designer.tasks.control)",
        "designer.tasks.control -> jaxenv.mapf.env: designer imports a family outside its "
        "task folder (designer.tasks.mapf)",
        "jaxenv.control.cartpole -> jaxenv.mapf.env: a family imports another family",
        "policy.llm.reward -> jaxenv.mapf.env: policy imports a family",
        "policy.ppo -> designer.run.loop: policy is below designer",
    ]
    del graph["designer.report"]
    graph["designer.run.loop"] = {"policy.ppo"}
    graph["policy.ppo"] = {"jaxenv.levels"}
    assert cycles(graph) == []
