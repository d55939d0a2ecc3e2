"""Served requests' traces as trajectories, for the API keys whose owners opted in.

A trace (``services/jobs/trace_store.py``: the ``SearchTrace`` message as JSON, with the name of
the API key that created the job stored beside it) holds the request's messages and every node
the search made; the chosen answer is the last node marked ``chosen`` (the search marks the
choice and its ancestors). Only the chosen candidate is taken: the prompt is the request's own
messages, the turn is the chosen node's text (a program-of-thought node: its program, what the
sandbox printed and the answer).

A trace is exported only when its recorded owner is one of the opted-in key names given to the
export: another key's traces, and traces with no owner, are never read into a row. A served
answer has no reference of its own, so it is verified only where an independent check exists:
its question is a known calibration problem (that problem's checker), or the job carried a
reference answer (the rule verifiers' equivalence test). Otherwise it is left out, counted.
The search's own verifier score is never read. Prompts that are, or contain, a development or
sealed question are left out (:class:`~evaluation.training.withheld.Withheld`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from evaluation.problems.datasets import Problem
from evaluation.problems.problemset import answer_correct
from evaluation.problems.sealed import text_hash
from evaluation.training.formats import Candidate, ChatMessage
from evaluation.training.outcomes import Outcome, program_outcome, text_outcome
from evaluation.training.trajectories import UNVERIFIABLE, Trajectory, program_turn
from evaluation.training.withheld import Withheld
from services.common.answers import extract_answer, program_answer
from services.search.strategies.program import program_source

ROLES = ("system", "user", "assistant")
#: a served trace's family and task kind in the manifest (a request names neither)
SERVED = "served"


def _messages(job: Mapping[str, Any]) -> tuple[ChatMessage, ...] | None:
    """The request's chat messages, ``None`` when they hold tool turns (not a chat to learn from)."""
    raw = list(job.get("messages") or ())
    if not raw and job.get("prompt"):
        raw = [{"role": "user", "content": job["prompt"]}]
    if not raw or any(m.get("role") not in ROLES or m.get("tool_calls") for m in raw):
        return None
    return tuple(ChatMessage(role=m["role"], content=str(m.get("content", ""))) for m in raw)


def chosen_node(nodes: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The chosen answer: the last node marked chosen that is not the prompt."""
    marked = [n for n in nodes if n.get("chosen") and n.get("action") != "prompt"]
    return marked[-1] if marked else None


def _problem(trace_id: str, question: str, reference: str, known: Mapping[str, Problem]) -> Problem | None:
    """The problem to check the answer by: the known problem with this question, else one made
    of the job's reference; ``None`` when neither exists (or it is a code problem: its hidden
    tests were never run on a served answer)."""
    problem = known.get(text_hash(question))
    if problem is None and reference.strip():
        problem = Problem(id=f"served/{trace_id}", dataset=SERVED, level=0, question=question, reference=reference)
    return None if problem is None or problem.check == "code" else problem


def _trajectory(trace_id: str, owner: str, doc: Mapping[str, Any], prompt: tuple[ChatMessage, ...],
                problem: Problem) -> Trajectory | None:  # fmt: skip
    node = chosen_node(doc.get("nodes") or ())
    if node is None:
        return None
    text = str(node.get("text", ""))
    execution = node.get("execution")
    result = doc.get("result") or {}
    if execution is not None:
        program = program_source(text) or ""
        status, stdout = str(execution.get("status", "")), str(execution.get("stdout", ""))
        answer = (program_answer(stdout) or "") if status == "ok" else ""
        correct = answer_correct(problem, answer)
        outcome = program_outcome(problem, correct, program=program, status=status, answer=answer)
        assistant = program_turn(program, status, stdout, answer) if program else text
    else:
        answer = extract_answer(text) or ""
        correct = answer_correct(problem, answer)
        outcome = text_outcome(problem, correct, answer)
        assistant = text
    if result.get("finish_reason") == "length":
        outcome = Outcome(False, correct, "cut", "hit max_tokens")
    candidate = Candidate(
        prompt_id=f"served/{trace_id}",
        candidate_id=f"served/{trace_id}/{node.get('id', '')}",
        source=f"served:{owner}",
        family=SERVED,
        task_kind=SERVED,
        modality="program" if execution is not None else "cot",
    )
    return Trajectory(
        candidate=candidate, prompt=prompt, completion=text,
        assistant=assistant, tokens=int(node.get("tokens") or 0), outcome=outcome,
    )  # fmt: skip


def served_trajectories(
    traces: Mapping[str, tuple[Mapping[str, Any], str]],
    opted_in: Collection[str],
    withheld: Withheld,
    known: Mapping[str, Problem],
    left_out: Counter[str],
) -> list[Trajectory]:
    """The chosen answers of ``traces`` (trace id -> (trace document, owner key name)) whose owner
    is in ``opted_in``; ``known``: calibration problems by question hash. Left-out traces are
    counted in ``left_out`` by reason."""
    found = []
    for trace_id, (doc, owner) in sorted(traces.items()):
        if not owner or owner not in opted_in:
            left_out["served traces: owner not opted in"] += 1
            continue
        job = doc.get("job") or {}
        prompt = _messages(job)
        users = [m.content for m in prompt or () if m.role == "user"]
        if prompt is None or not users:
            left_out[f"served traces: {UNVERIFIABLE}"] += 1
            continue
        if (why := withheld.prompt_reason(m.content for m in prompt)) is not None:
            left_out[f"served traces: {why}"] += 1
            continue
        problem = _problem(trace_id, users[-1], str(job.get("reference", "")), known)
        trajectory = None if problem is None else _trajectory(trace_id, owner, doc, prompt, problem)
        if trajectory is None:
            left_out[f"served traces: {UNVERIFIABLE}"] += 1
            continue
        found.append(trajectory)
    return found
