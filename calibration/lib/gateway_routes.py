"""Routes predicted as the gateway chooses them: the routing table's zero-token difficulty
estimator (the gateway's own, with the MiniLM encoder it loads) and task-type classifier pick
each question's route per effort.

Routing with a zero-token estimator is deterministic, so this is what a routed request will
run: the development ladder prices these routes on the development split's pools (``development``) and the routed run
predicts, and then checks, the route of every request it sends (``routed``). A probe estimator
would need live requests, so it is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast, get_args

from evaluation.routing.types import BUDGET_MULTIPLES
from services.common.difficulty_features import estimation_text
from services.common.task_type import classify_task
from services.gateway.difficulty import load_encoder, make_estimator
from services.gateway.protocol import Effort
from services.gateway.routing import Route, RoutingTable

# The efforts a fitted ladder has budgets for, lowest first.
LADDER_EFFORTS: tuple[str, ...] = tuple(e for e in get_args(Effort) if e in BUDGET_MULTIPLES)


def route_questions(
    table: RoutingTable, questions: Mapping[str, str], efforts: Sequence[str]
) -> dict[str, dict[str, Route]]:
    """``effort → problem id → route`` for each question, as the gateway routes its prompt: the
    gateway's task-type classifier and the table's zero-token estimator and bins."""
    estimator = make_estimator(table.estimator, policy=None, timeout_s=0.0, encoder=load_encoder(table.estimator))  # type: ignore[arg-type]
    if estimator is not None and table.estimator.kind != "embedding":
        raise ValueError("ladder needs a zero-token estimator (kind 'embedding' or 'none'): a probe must run live")
    chosen: dict[str, dict[str, Route]] = {e: {} for e in efforts}
    for pid, question in questions.items():
        text = estimation_text([("user", question)], "")
        task = classify_task(text)
        bin_name = None
        if estimator is not None:
            bin_name = table.bin_of(estimator.difficulty(text))  # type: ignore[attr-defined]
        for effort in efforts:
            chosen[effort][pid] = table.route(cast(Effort, effort), bin_name, task)
    return chosen
