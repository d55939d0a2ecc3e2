"""The abstract strategy. A strategy object holds only validated configuration (TreeQuest
style); the per-run state lives in the :class:`~.context.Context`.

The parts every strategy shares live beside it, one job each:

- ``config.py``: ``StrategyInput`` (the job's raw configuration), ``Sampling``, ``read_n``;
- ``verifier_choice.py``: ``VerifierChoice`` and ``read_verifier`` (the verifier's own rules);
- ``results.py``: ``Choice``, ``Outcome``, ``Termination``;
- ``context.py``: ``Context``, ``GenRequest``, ``Generated`` (every call to another service);
- ``runner.py``: ``execute`` and ``Execution`` (best answer so far, whatever stopped the run);
- ``text.py``: ``states_final_answer``, ``question_text``, ``safe_mean``.
"""

from __future__ import annotations

import abc
from typing import ClassVar

from services.search.strategies.config import StrategyInput
from services.search.strategies.context import Context
from services.search.strategies.results import Outcome


class Strategy(abc.ABC):
    """A configured test-time strategy. Construct with :meth:`from_input` (validates)."""

    name: ClassVar[str]

    @classmethod
    @abc.abstractmethod
    def from_input(cls, spec: StrategyInput) -> Strategy:
        """Validate ``spec`` and build the strategy; raises ``InvalidArgument`` naming the field."""

    @abc.abstractmethod
    async def run(self, ctx: Context) -> Outcome:
        """Run to completion; may raise ``StopSearch`` (the runner keeps the best so far)."""
