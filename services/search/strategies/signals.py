"""The confidence signals of a strategy's final vote, by the rules the calibration replays use.

``ttc.confidence`` is a model fitted offline (``evaluation/confidence/``) on the
:class:`~services.common.confidence.ConfidenceSignals` that replaying a configuration on pools
of candidates yields. The fitted model applies to a live answer only if the live signals are
computed the same way, so the rules are written here once, pure, and a unit test holds them
equal to the replay's (``evaluation/pricing/pricer.py``: ``pool_signals``, ``Pricer.sampled_vote``,
``Pricer.pot_run``) on the same ballots:

- every ballot drawn counts (``votes``), abstaining ones (no vote key) included; the share is
  the chosen answer's vote weight over all ballots' weight, abstentions included;
- ``distinct`` counts distinct non-empty keys, ``abstained`` the ballots without one;
- program-of-thought's chain-of-thought fallback reports its own share (1.0), with the
  programs counted as votes and abstentions;
- the hybrid's agreement compares the programs' heaviest answer with the thoughts' (ties: the
  earliest ballot, as the replay's ``winner``).

One rule differs on purpose: where no ballot had a key at all (open-ended text, a vote in which
nothing answered) there is nothing to be confident about, and the signals are ``None`` (the
answer's confidence is absent) rather than the fitted floor for "nothing answered".
"""

from __future__ import annotations

from collections.abc import Sequence

from services.common.confidence import ConfidenceSignals, shipped
from services.common.confidence_prompt import with_prompt
from services.common.difficulty_features import estimation_text
from services.common.task_type import TaskType, classify_task
from services.search.interfaces import RAW_PROMPT_ROLE, Message

# Configuration families (docs/confidence.md): the replays' names, so the fitted intercepts apply.
SC = "sc"
WVOTE = "wvote"
BON = "bon"
POT = "pot"
HYBRID = "hybrid"
# Code candidates grouped by behaviour on model-written inputs. The pools' ``code_vote`` groups
# equal source text, a different vote, so this family is not fitted and takes the fallback.
CODE_CLUSTERS = "code_clusters"


def heaviest(keys: Sequence[str], weights: Sequence[float]) -> str | None:
    """The non-empty key of the most weight (ties: the earliest first appearance), ``None``
    when no key is non-empty: ``evaluation.pricing.pricer.winner`` without logprob ties."""
    total: dict[str, float] = {}
    for key, weight in zip(keys, weights, strict=True):
        if key:
            total[key] = total.get(key, 0.0) + weight
    if not total:
        return None
    first = {key: i for i, key in reversed(list(enumerate(keys))) if key}
    return max(total, key=lambda k: (round(total[k], 12), -first[k]))


def vote_signals(
    config: str,
    keys: Sequence[str],
    weights: Sequence[float],
    chosen: str,
    *,
    judge_score: float | None = None,
    programs_agree: bool | None = None,
) -> ConfidenceSignals | None:
    """The signals of a vote whose ballots have ``keys`` ("" abstains) and ``weights``, which
    chose the answer keyed ``chosen`` ("" when the chosen candidate has no key: share 0).
    ``None`` when no ballot has a key."""
    if not any(keys):
        return None
    total = sum(weights)
    share = 0.0
    if chosen and total > 0:
        share = sum(w for k, w in zip(keys, weights, strict=True) if k == chosen) / total
    return ConfidenceSignals(
        config=config,
        vote_share=share,
        votes=len(keys),
        distinct=len({k for k in keys if k}),
        abstained=sum(1 for k in keys if not k),
        programs_agree=programs_agree,
        judge_score=judge_score,
    )


def fallback_signals(config: str, programs: int, key: str) -> ConfidenceSignals | None:
    """No program answered and one greedy chain of thought answered alone. Its share is of every
    ballot cast, the ``programs`` abstaining ones included, as :func:`vote_signals` counts
    abstentions: ``1 / (programs + 1)``. (A share of 1.0 made a fallback look like a unanimous
    vote: served at 0.72 where 14 of 14 such answers were wrong, docs/confidence.md.) The
    replay's rule is the same (``evaluation/pricing/pricer.py:Pricer.pot_run``)."""
    if not key:
        return None
    return ConfidenceSignals(
        config=config, vote_share=1.0 / (programs + 1), votes=programs + 1, distinct=1, abstained=programs
    )


def agreement(
    program_keys: Sequence[str], program_weights: Sequence[float], thought_keys: Sequence[str],
    thought_weights: Sequence[float],
) -> bool | None:  # fmt: skip
    """Whether the programs' vote and the thoughts' vote lead with the same answer; ``None``
    when either side has no answer (or there are no thoughts)."""
    if not thought_keys:
        return None
    programs, thoughts = heaviest(program_keys, program_weights), heaviest(thought_keys, thought_weights)
    if programs is None or thoughts is None:
        return None
    return programs == thoughts


def unanimous(family: str, votes: int, thoughts: int = 0) -> ConfidenceSignals:
    """The signals of a vote in which every ballot agrees and none abstains: ``votes`` ballots
    (programs or samples), ``thoughts`` of them the hybrid's chains of thought. A cascade whose
    small run would fall short of its threshold even so cannot be settled by it, and skips it
    (``strategies/cascade.py``; priced the same way by ``evaluation/pricing/cascade.py:cascade``)."""
    return ConfidenceSignals(family, 1.0, votes=votes, distinct=1, abstained=0,
                             programs_agree=True if thoughts > 0 else None)  # fmt: skip


def prompt_text(problem: Sequence[Message]) -> str:
    """The text the gateway read the prompt's task type and difficulty from when it routed the
    job (``estimation_text``: the last user message, else the raw prompt), so the task feature
    and the prior the confidence model was fitted on (``evaluation.pools.store.task_type_of``) are the
    ones it is served with."""
    raw = "".join(m.content for m in problem if m.role == RAW_PROMPT_ROLE)
    return estimation_text([(m.role, m.content) for m in problem if m.role != RAW_PROMPT_ROLE], raw)


def task_type_of(problem: Sequence[Message]) -> TaskType:
    """The prompt's task type by the gateway's rules on :func:`prompt_text`."""
    return classify_task(prompt_text(problem))


def answer_confidence(signals: ConfidenceSignals | None, problem: Sequence[Message]) -> float | None:
    """``ttc.confidence`` of an answer with ``signals`` to ``problem`` by the shipped model, with
    what the prompt says (its task type and prior: ``confidence_prompt.with_prompt``); ``None``
    without signals."""
    if signals is None:
        return None
    model = shipped()
    return model.probability(with_prompt(signals, prompt_text(problem), model))
