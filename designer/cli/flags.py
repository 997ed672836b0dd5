"""The run flags, generated from the settings: a field whose metadata names a `flag`
(`designer.stage_settings.flag`) is `--flag`, its help is the field's description (and choices), its
type the field's; bounds and cross-field rules are the settings' own, so the command line and a
sweep refuse the same values. Building `RunSettings` from flags, a settings file or a saved
run folder happens here.
"""

from __future__ import annotations

import argparse
import json
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from designer.cli.door import CliError, is_file, on_off
from designer.settings import RunSettings, migrate


def _unwrap(annotation: Any) -> Any:
    """`X | None` -> X."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def run_flags(model: type[BaseModel] = RunSettings, prefix: str = ""
              ) -> Iterator[tuple[str, str, Any]]:
    """(flag, dotted settings path, field info) of every field that names a flag, nested
    settings included, in the settings' order."""
    for name, info in model.model_fields.items():
        kind = _unwrap(info.annotation)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            yield from run_flags(kind, f"{prefix}{name}.")
            continue
        extra = info.json_schema_extra
        if isinstance(extra, dict) and extra.get("flag"):
            yield str(extra["flag"]), prefix + name, info


def _help(info: Any) -> str:
    text = (info.description or "").rstrip(".")
    kind = _unwrap(info.annotation)
    if typing.get_origin(kind) is Literal:
        choices = ", ".join(str(c) for c in typing.get_args(kind))
        text += f" (one of {choices})"
    elif kind is bool:
        text = "on/off: " + text
    bounds = [f"{word} {getattr(m, attr):g}" for m in info.metadata
              for attr, word in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
              if hasattr(m, attr)]
    if bounds:
        text += f" ({', '.join(bounds)})"
    return text.replace("%", "%%")


def _type(kind: Any) -> Any:
    if kind is bool:
        return on_off
    if kind in (int, float):
        return kind
    return str  # text and choices: the settings check them (one message for flags and files)


def add_run_flags(p: argparse.ArgumentParser) -> None:
    """Every run setting's flag, and --settings FILE."""
    for flag, _, info in run_flags():
        if info.json_schema_extra.get("switch"):
            p.add_argument(f"--{flag}", action="store_const", const=True, default=None,
                           help=_help(info))
        else:
            p.add_argument(f"--{flag}", type=_type(_unwrap(info.annotation)), default=None,
                           help=_help(info))
    p.add_argument("--settings", type=Path, help="a JSON, TOML or YAML file of run settings "
                   "(flags override it)")


def read_settings_file(path: Path) -> dict[str, Any]:
    """The mapping a JSON, TOML or YAML settings file holds."""
    if not is_file(path):
        raise CliError(f"settings file {path} not found")
    try:
        text = path.read_text()
        if path.suffix == ".toml":
            import tomllib

            return tomllib.loads(text)
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as e:  # any parser's error is the user's malformed file
        first = (str(e).splitlines() or [type(e).__name__])[0]
        raise CliError(f"settings file {path} is malformed: {first}") from None
    if not isinstance(data, dict):
        raise CliError(f"settings file {path} must hold a mapping of settings")
    return data


def build_settings(args: argparse.Namespace, base: dict[str, Any] | None = None) -> RunSettings:
    """The settings of --settings FILE (if given) with the flags given over it."""
    data: dict[str, Any] = dict(base or {})
    if getattr(args, "settings", None):
        data.update(read_settings_file(args.settings))
    for flag, path, _ in run_flags():
        v = getattr(args, flag.replace("-", "_"), None)
        if v is None:
            continue
        *parents, leaf = path.split(".")
        d = data
        for part in parents:
            given = d.get(part)
            d[part] = dict(given) if isinstance(given, dict) else {}
            d = d[part]
        d[leaf] = v
    return settings_from(data)


def _refusal(e: ValidationError) -> CliError:
    err = e.errors()[0]
    where = ".".join(str(x) for x in err["loc"]) or "settings"
    msg = " ".join(str(err["msg"]).removeprefix("Value error, ").split())
    return CliError(f"bad value for {where}: {msg}")


def settings_from(data: dict[str, Any]) -> RunSettings:
    """`RunSettings` from a mapping, or one line naming the refused field."""
    try:
        return RunSettings.model_validate(data)
    except ValidationError as e:
        raise _refusal(e) from None


def saved_settings(run_json: Path) -> RunSettings:
    """The settings a run folder was started with, through the one migration of old runs
    (`designer.settings.migrate`: options added since are filled in as that run had them)."""
    from designer.run.folder import RunFolder

    try:
        return migrate(RunFolder(run_json.parent).run_json())
    except ValidationError as e:
        raise CliError(f"{run_json}: {_refusal(e)}") from None
    except (ValueError, OSError) as e:
        first = (str(e).splitlines() or [type(e).__name__])[0]
        raise CliError(f"{run_json}: {first}") from None
