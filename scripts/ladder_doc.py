"""Write (or check) the generated ladder-card section of ``docs/effort-ladder.md``.

The section is rendered by ``services/gateway/ladder_card.py:render_section`` - the function
behind ``GET /v1/models/{model}/ladder`` - from the routing tables a gateway serves with its
default settings (``TTC_GATEWAY_ROUTING_TABLE`` and ``TTC_GATEWAY_ROUTING_TABLES`` as shipped;
``--table``/``--tables`` render others, e.g. a table ``make calibrate`` wrote). It sits between
``<!-- ladder-card:begin -->`` and ``<!-- ladder-card:end -->``; ``--check`` fails when it is
stale, ``--write`` rewrites it, neither prints it.

A second section, between ``<!-- ladder-card-escalation:begin -->`` and its end, holds the card
of every shipped table fitted with cascades onto a larger model
(``services/gateway/routing/routing.<small>+<large>.json``, ``make routing-table``), which
``ttc stack`` serves for ``<small>`` when ``TTC_STACK_LARGE_MODEL=<large>``; the page needs it
only when such a table exists.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from services.gateway.ladder_card import ladder_card, render_card, render_section  # noqa: E402
from services.gateway.model_tables import load_model_tables, load_table_file  # noqa: E402
from services.gateway.settings import GatewaySettings  # noqa: E402

BEGIN, END = "<!-- ladder-card:begin -->", "<!-- ladder-card:end -->"
ESCALATION_BEGIN, ESCALATION_END = "<!-- ladder-card-escalation:begin -->", "<!-- ladder-card-escalation:end -->"
DOC = ROOT / "docs" / "effort-ladder.md"
ROUTING_DIR = ROOT / "services" / "gateway" / "routing"


def shipped(name: str) -> str:
    """A setting's shipped default (never the environment's: the page documents what ships)."""
    return str(GatewaySettings.model_fields[name].default)


def replace_section(text: str, section: str, where: str, begin: str = BEGIN, end: str = END) -> str:
    """``text`` with the part between the markers replaced by ``section`` (``ValueError`` without them)."""
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise ValueError(f"{where} needs exactly one {begin} ... {end} section")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{section}{end}{tail}"


def escalation_section(routing_dir: Path) -> str:
    """The card of every table fitted with cascades in ``routing_dir`` ("" when there is none)."""
    cards = []
    for path in sorted(routing_dir.glob("routing.*+*.json")):
        small, large = path.name.removeprefix("routing.").removesuffix(".json").split("+", 1)
        table = load_table_file(path, what=f"{small} escalating to {large}")
        cards.append(
            f"Served for `{small}` by `ttc stack` with `TTC_STACK_LARGE_MODEL={large}` (escalation model "
            f"`{table.table.escalation_model}`); routes named `cascade` run the small model's vote first.\n\n"
            + render_card(ladder_card(small, table, own=True))
        )
    return "\n".join(cards)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--check", action="store_true", help="fail if the page's section is stale")
    group.add_argument("--write", action="store_true", help="rewrite the page's section")
    parser.add_argument("--doc", type=Path, default=DOC, help="the page (default: docs/effort-ladder.md)")
    parser.add_argument("--table", default=shipped("routing_table"), help="the default routing table")
    parser.add_argument("--tables", default=shipped("routing_tables"), help="per-model tables, 'model=path,...'")
    parser.add_argument("--routing-dir", type=Path, default=ROUTING_DIR,
                        help="where the tables fitted with cascades are (routing.<small>+<large>.json)")  # fmt: skip
    args = parser.parse_args(argv)
    section = render_section(load_model_tables(args.table, args.tables))
    if not (args.check or args.write):
        print(section, end="")
        return 0
    text = args.doc.read_text()
    try:
        updated = replace_section(text, section, str(args.doc))
        escalating = escalation_section(args.routing_dir)
        if escalating or ESCALATION_BEGIN in text:
            updated = replace_section(updated, escalating, str(args.doc), ESCALATION_BEGIN, ESCALATION_END)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 1
    if args.check:
        if updated != text:
            print(
                f"the ladder card in {args.doc} is stale; run `python scripts/ladder_doc.py --write`", file=sys.stderr
            )
            return 1
        print("ladder card section is up to date")
        return 0
    args.doc.write_text(updated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
