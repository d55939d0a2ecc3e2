"""The runner: run a strategy and always come back with the best answer so far and a reason."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from services.search.budget import StopSearch
from services.search.strategies.base import Strategy
from services.search.strategies.context import Context
from services.search.strategies.results import Choice, Termination

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Execution:
    choice: Choice | None
    termination: Termination
    error: str = ""
    code: str = ""  # gRPC status code name of the error ("" = INTERNAL), from the stop's typed attributes
    component: str = ""


async def execute(strategy: Strategy, ctx: Context) -> Execution:
    """Run ``strategy`` and always come back with the best answer so far and a reason."""
    try:
        outcome = await strategy.run(ctx)
    except StopSearch as stop:
        ctx.event("stop", f"stopped ({stop.termination}): {stop}")
        error = str(stop) if stop.termination in ("error", "cancelled") else ""
        code, component = (stop.code, stop.component) if error else ("", "")
        return Execution(ctx.best, stop.termination, error, code, component)  # type: ignore[arg-type]
    except Exception as err:  # a strategy bug: report it, keep the answer we have
        logger.exception("strategy %s crashed", strategy.name)
        return Execution(ctx.best, "error", f"internal error in {strategy.name}: {err}", "INTERNAL")
    choice = outcome.choice if outcome.choice is not None else ctx.best
    return Execution(choice, outcome.termination)
