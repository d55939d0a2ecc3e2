"""Render every service's settings as one Markdown table, the README's single source.

Settings classes are found in ``services/*/settings.py`` (and ``services/common``); the
table sits in the README between two marker comments. ``--check`` fails when the README's
table is stale, ``--write`` rewrites it in place.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from pathlib import Path

from pydantic_settings import BaseSettings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
BEGIN, END = "<!-- settings-table:begin -->", "<!-- settings-table:end -->"


def settings_classes() -> list[type[BaseSettings]]:
    """Every BaseSettings subclass defined in a services settings module, common first."""
    found: list[type[BaseSettings]] = []
    paths = sorted(ROOT.glob("services/*/settings.py"), key=lambda p: (p.parent.name != "common", p.parent.name))
    for path in paths:
        module = importlib.import_module(f"services.{path.parent.name}.settings")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseSettings) and obj is not BaseSettings and obj.__module__ == module.__name__:
                found.append(obj)
    return found


def render() -> str:
    rows = ["| Variable | Default | Description |", "|---|---|---|"]
    for cls in settings_classes():
        prefix = str(cls.model_config.get("env_prefix", ""))
        for name, field in cls.model_fields.items():
            default = field.get_default(call_default_factory=True)
            shown = "" if default in ("", None) else f"`{default}`"
            description = (field.description or "").replace("|", "\\|")
            rows.append(f"| `{prefix}{name.upper()}` | {shown} | {description} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--check", type=Path, help="fail if this file's table is stale")
    group.add_argument("--write", type=Path, help="rewrite the table in this file")
    args = parser.parse_args()
    table = render()
    target = args.check or args.write
    if target is None:
        print(table)
        return 0
    text = target.read_text()
    if BEGIN not in text or END not in text:
        print(f"{target} has no {BEGIN} ... {END} section", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    updated = f"{head}{BEGIN}\n{table}\n{END}{tail}"
    if args.check:
        if updated != text:
            print(f"the settings table in {target} is stale; run `make settings-table`", file=sys.stderr)
            return 1
        print("settings table is up to date")
        return 0
    target.write_text(updated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
