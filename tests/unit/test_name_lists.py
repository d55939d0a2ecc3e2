"""One source for every name list; every copy that cannot import it is held equal to it here.

- strategies: the registry (``services/search/strategies/__init__.py``) is the source; the
  gateway's ``StrategyName`` literal (the gateway may not import the orchestrator), the comment on
  ``StrategySpec.name`` in ``orchestrator.proto`` and the table in ``docs/strategies.md`` are copies.
- verifiers: ``services/common/verifiers.py`` is the source; the verifier service's registry and
  the gateway's ``VerifierName`` literal are copies (the orchestrator imports the source).
- engines: ``ENGINE_MODULES`` (``services/policy/engines/__init__.py``) is the source; the Helm
  schema is generated from it (``scripts/helm_schema.py``; no chart template keeps its own list);
  the settings' ``engine`` literal is a copy.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import get_args

import pytest

from services.common.errors import InvalidArgument
from services.common.verifiers import HARD_VERIFIERS, VERIFIER_NAMES, check_ensemble
from services.gateway.protocol import StrategyName, VerifierName
from services.policy.engines import ENGINE_MODULES
from services.policy.settings import PolicySettings
from services.search.strategies import REGISTRY
from services.verifier.registry import build_registry
from services.verifier.settings import VerifierSettings

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import helm_schema  # noqa: E402


def drift(copy: str, names: Iterable[str], source: Iterable[str]) -> str:
    """``""`` when the copy equals the source as a set (and repeats nothing), else what differs."""
    copied, known = list(names), set(source)
    missing, extra = sorted(known - set(copied)), sorted(set(copied) - known)
    repeated = sorted({n for n in copied if copied.count(n) > 1})
    if not (missing or extra or repeated):
        return ""
    return f"{copy} drifted from its source: missing {missing}, unknown {extra}, repeated {repeated}"


# -- readers of the copies that are text ------------------------------------------------------
def proto_strategy_names(text: str) -> list[str]:
    """Quoted names in the comment directly above ``StrategySpec.name``."""
    body = text[text.index("message StrategySpec {") :]
    comment = body[: body.index("string name = 1;")]
    return re.findall(r'"([a-z0-9_]+)"', comment)


def docs_strategy_names(text: str) -> list[str]:
    """Backticked names in the first column of the table after the strategies heading."""
    section = text[text.index("## Strategies (registry names") :]
    names: list[str] = []
    for line in section.splitlines()[1:]:
        if line.startswith("## "):
            break
        if line.startswith("| `"):
            names += re.findall(r"`([a-z0-9_]+)`", line.split("|")[1])
    return names


def template_lists(text: str) -> list[list[str]]:
    """Every literal ``(list "a" "b" ...)`` in a Helm template."""
    return [re.findall(r'"([a-z0-9_]+)"', m) for m in re.findall(r'\(list((?:\s+"[a-z0-9_]+")+)\s*\)', text)]


# -- strategies -------------------------------------------------------------------------------
def test_gateway_strategy_literal_is_the_registry() -> None:
    assert not (d := drift("services/gateway/protocol.py StrategyName", get_args(StrategyName), REGISTRY)), d


def test_proto_comment_lists_the_registry() -> None:
    text = (ROOT / "proto/ttc/v1/orchestrator.proto").read_text()
    assert not (d := drift("orchestrator.proto StrategySpec.name", proto_strategy_names(text), REGISTRY)), d


def test_docs_table_lists_the_registry() -> None:
    text = (ROOT / "docs/strategies.md").read_text()
    assert not (d := drift("docs/strategies.md table", docs_strategy_names(text), REGISTRY)), d


# -- verifiers --------------------------------------------------------------------------------
def test_gateway_verifier_literal_is_the_common_list() -> None:
    assert not (d := drift("services/gateway/protocol.py VerifierName", get_args(VerifierName), VERIFIER_NAMES)), d


def test_the_verifier_service_offers_exactly_the_common_list() -> None:
    registry = build_registry(VerifierSettings(), policy=None, sandbox=None)  # type: ignore[arg-type]
    offered = [kind.info.name for kind in registry.all()]
    assert not (d := drift("services/verifier/registry.py", offered, VERIFIER_NAMES)), d
    assert set(HARD_VERIFIERS) <= set(VERIFIER_NAMES)


# -- engines ----------------------------------------------------------------------------------
def test_settings_engine_literal_is_the_engine_list() -> None:
    literal = get_args(PolicySettings.model_fields["engine"].annotation)
    assert not (d := drift("services/policy/settings.py engine", literal, ENGINE_MODULES)), d


def test_the_helm_schema_is_the_charts_only_engine_list() -> None:
    schema = helm_schema.build()["properties"]["policy"]["properties"]["engine"]["enum"]
    assert schema == list(ENGINE_MODULES)
    for template in sorted((ROOT / "helm/ttc/templates").iterdir()):
        copies = [names for names in template_lists(template.read_text()) if set(names) & set(ENGINE_MODULES)]
        assert copies == [], f"{template.name} keeps its own engine list {copies}; values.schema.json checks it"


# -- the checks can fail ----------------------------------------------------------------------
def test_drift_names_what_differs() -> None:
    assert drift("x", ["a", "b"], ("b", "a")) == ""
    assert drift("x", ["a", "a", "c"], ("a", "b")) == (
        "x drifted from its source: missing ['b'], unknown ['c'], repeated ['a']"
    )


def test_the_text_readers_see_a_drifted_copy() -> None:
    proto = 'message StrategySpec {\n  // "single", "mcts".\n  string name = 1;\n  // "dvts"\n}'
    assert proto_strategy_names(proto) == ["single", "mcts"]
    docs = "## Strategies (registry names as in x)\n\n| name |\n|---|\n| `single` | a |\n| `a` / `b` | `d` |\n"
    docs += "## Next\n| `e` |"
    assert docs_strategy_names(docs) == ["single", "a", "b"]
    template = '{{- if not (has $c.engine (list "llamacpp" "vllm")) }}{{ has 1 (list "a") }}'
    assert template_lists(template) == [["llamacpp", "vllm"], ["a"]]


# -- one ensemble rule, applied by the verifier and the orchestrator --------------------------
@pytest.mark.parametrize(
    ("members", "keyed", "field"),
    [
        ([], False, "ensemble"),
        ([("orm", 0.0), ("prm", 0.0)], False, "ensemble"),
        ([("orm", 0), ("prm", 0)], True, "strategy.params.ensemble"),
        ([("orm", -1.0)], False, "ensemble[0].weight"),
        ([("orm", math.inf)], True, "strategy.params.ensemble.orm"),
        ([("orm", True)], True, "strategy.params.ensemble.orm"),
        ([("orm", "1")], True, "strategy.params.ensemble.orm"),
        ([("orm", 1.0), ("ensemble", 1.0)], False, "ensemble[1].name"),
        ([("oracle", 1.0)], True, "strategy.params.ensemble.oracle"),
    ],
)
def test_one_ensemble_rule(members: list[tuple[str, object]], keyed: bool, field: str) -> None:
    prefix = "strategy.params.ensemble" if keyed else "ensemble"
    with pytest.raises(InvalidArgument) as err:
        check_ensemble(members, field=prefix, keyed=keyed)
    assert err.value.field == field


def test_a_zero_weight_member_next_to_a_positive_one_is_fine() -> None:
    check_ensemble([("orm", 0.0), ("prm", 0.5)])
