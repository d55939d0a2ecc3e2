"""Which strategies apply to which requests, and where to route a request one cannot serve.

Tools, a response format, token logprobs and several answers each need something of the
strategy: a whole answer sampled in one piece (tools, a JSON constraint: a step search over
partial text, a forced "Final Answer:" prefix or a written program cannot carry them), one
sampled candidate as the returned text (logprobs), and a ranking of distinct answers (n > 1).
``CAPABILITIES`` says, per strategy, what it supports; its names equal the orchestrator's
registry (``tests/unit/jobs/test_compat.py``). Pure, no I/O, importing no strategy code: the
gateway calls :func:`reroute` to pick the strategy to route to (and reports the change in
``ttc``), and :func:`incompatibilities` to answer 400; the orchestrator's ``validate_job``
refuses what remains through :func:`check` (INVALID_ARGUMENT naming the field).
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf import struct_pb2

from services.common.errors import InvalidArgument
from services.gen.ttc.v1 import orchestrator_pb2

FEATURES = ("tools", "response_format", "logprobs", "answers")


@dataclass(frozen=True)
class Capability:
    """What a strategy supports; ``verifier`` says whether it judges with a verifier by default."""

    tools: bool
    response_format: bool
    logprobs: bool
    answers: bool
    verifier: bool
    why: str  # why it refuses what it refuses ("" when it refuses nothing)


_STEPS = "it searches over partial text steps, which a tool call or a JSON constraint cannot be split into"
CAPABILITIES: dict[str, Capability] = {
    "single": Capability(True, True, True, True, False, ""),
    "self_consistency": Capability(True, True, True, True, False, ""),
    "weighted_vote": Capability(True, True, True, True, True, ""),
    "best_of_n": Capability(True, True, True, True, True, ""),
    "beam_search": Capability(False, False, False, False, True, _STEPS + "; its answer joins several generations"),
    "dvts": Capability(False, False, False, False, True, _STEPS + "; its answer joins several generations"),
    "mcts": Capability(False, False, False, False, True, _STEPS + "; its answer joins several generations"),
    "ab_mcts_a": Capability(False, False, False, False, True, "its refinements rewrite text answers from feedback"),
    "ab_mcts_m": Capability(False, False, False, False, True, "its refinements rewrite text answers from feedback"),
    "budget_forcing": Capability(
        False, False, False, False, False, "its answer is a forced 'Final Answer:' prefix plus a continuation"
    ),
    "revision": Capability(False, True, True, True, True, "its feedback rounds revise text, not tool calls"),
    "program_of_thought": Capability(
        False, False, False, False, False, "its answer is a program run in the sandbox and the output it printed"
    ),
    "cascade": Capability(
        False, False, False, False, False, "it votes on answers of two models; no tool call, JSON or logprobs survive"
    ),
    "adaptive": Capability(
        False, False, False, False, False, "it votes on programs run in the sandbox and on chains of thought"
    ),
    "code_execution": Capability(
        False, False, True, True, False, "it runs code candidates in the sandbox, which a tool call or JSON is not"
    ),
}
# The strategies a rerouted request goes to: voting (tools, or no verifier) or verifier-weighted voting.
VOTING = "self_consistency"
WEIGHTED = "weighted_vote"
# A rerouted search draws at least this many candidates, so the vote means something.
MIN_VOTE_N = 3
MAX_VOTE_N = 64
# Verifier parameters that keep their meaning in weighted_vote.
_VERIFIER_PARAMS = ("aggregation", "format_pattern", "code", "ensemble")


def wanted(job: orchestrator_pb2.SearchJob) -> list[str]:
    """The features of FEATURES the job asks for."""
    asked = {
        "tools": bool(job.tools.tools) and job.tools.choice != "none",
        "response_format": job.response_format.WhichOneof("kind") is not None,
        "logprobs": job.logprobs,
        "answers": job.answers > 1,
    }
    return [f for f in FEATURES if asked[f]]


def supports(strategy: str, feature: str) -> bool:
    capability = CAPABILITIES.get(strategy)
    return capability is None or bool(getattr(capability, feature))


def incompatibilities(job: orchestrator_pb2.SearchJob) -> list[tuple[str, str]]:
    """``(field, why)`` for each feature the job's strategy cannot serve (empty: none)."""
    name = job.strategy.name
    capability = CAPABILITIES.get(name)
    if capability is None:
        return []
    able = ", ".join(s for s in CAPABILITIES if all(supports(s, f) for f in wanted(job)))
    return [
        (feature, f"strategy {name!r} cannot serve {feature}: {capability.why}; strategies that can: {able}")
        for feature in wanted(job)
        if not supports(name, feature)
    ]


def check(job: orchestrator_pb2.SearchJob) -> None:
    """``InvalidArgument`` naming the first feature the job's strategy cannot serve."""
    for field, why in incompatibilities(job):
        raise InvalidArgument(why, field=field)


@dataclass(frozen=True)
class Reroute:
    """The strategy to run instead, and why (for ``ttc``)."""

    strategy: orchestrator_pb2.StrategySpec
    reason: str


def reroute(job: orchestrator_pb2.SearchJob) -> Reroute | None:
    """The compatible strategy for a job whose strategy cannot serve what it asks, else None.

    Tool calls go to self-consistency (votes over normalized calls; a verifier has no meaning
    for a call); otherwise a verifier strategy goes to weighted voting with the same verifier
    (and its verifier parameters), anything else to self-consistency. ``n`` is kept, at least
    ``MIN_VOTE_N`` and at least the answers asked for."""
    refused = incompatibilities(job)
    if not refused:
        return None
    old = job.strategy
    capability = CAPABILITIES[old.name]
    keep_verifier = "tools" not in wanted(job) and (capability.verifier or bool(old.verifier))
    n = min(MAX_VOTE_N, max(old.n, job.answers, MIN_VOTE_N))
    spec = orchestrator_pb2.StrategySpec(name=WEIGHTED if keep_verifier else VOTING, n=n)
    if keep_verifier:
        spec.verifier = old.verifier
        kept = {k: v for k, v in old.params.items() if k in _VERIFIER_PARAMS}
        if kept:
            params = struct_pb2.Struct()
            params.update(kept)
            spec.params.CopyFrom(params)
    fields = ", ".join(f for f, _ in refused)
    return Reroute(spec, f"{old.name} cannot serve {fields} ({capability.why}); routed to {spec.name} n={n}")
