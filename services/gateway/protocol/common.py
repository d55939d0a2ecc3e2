"""Names and base classes every part of the gateway's wire protocol shares."""

from __future__ import annotations

import time
import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict

Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
StrategyName = Literal[
    "single",
    "self_consistency",
    "weighted_vote",
    "best_of_n",
    "beam_search",
    "dvts",
    "mcts",
    "ab_mcts_a",
    "ab_mcts_m",
    "budget_forcing",
    "revision",
    "program_of_thought",
    "code_execution",
    "cascade",
    "adaptive",
]
VerifierName = Literal["math_equivalence", "format", "code_tests", "orm", "prm", "ensemble"]

# OpenAI's n: answers per request. Each is a distinct answer of the one search (docs/gateway.md).
MAX_CHOICES = 8
# OpenAI's limits on top_logprobs (chat) and logprobs (legacy completions).
MAX_TOP_LOGPROBS = 20
MAX_COMPLETION_LOGPROBS = 5


class Strict(BaseModel):
    """Request objects forbid unknown fields, as OpenAI's API does ("Unrecognized request argument")."""

    model_config = ConfigDict(extra="forbid")


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def now() -> int:
    return int(time.time())
