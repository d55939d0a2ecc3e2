"""A live reply checked as the pools check their candidates, and what its record keeps.

Code runs on the problem's hidden tests in the grading sandbox (:mod:`~.grading`); any other
reply is checked by the pools' checker on the answer the gateway rendered. A failed request, a
search that ended without an answer or a check the sandbox could not make is an infrastructure
error, recorded as such and never counted wrong. :func:`regrade` re-checks kept replies when
the checker changes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from calibration.lib.grading import CodeGrader
from calibration.lib.records import LiveRunError, chunk_paths, read_chunk, write_records
from evaluation.pools.provenance import git_describe
from evaluation.pools.store import ProblemPool
from evaluation.problems.checkers import check_code
from evaluation.problems.datasets import Problem
from evaluation.problems.problemset import answer_correct
from loadtests.client import Reply
from loadtests.runner import GAVE_UP
from services.common.answers import extract_answer


def reply_fields(reply: Reply) -> dict[str, Any]:
    """What every live record keeps of a reply: usage, latency, what the search reported, the
    served ``ttc.confidence`` (with the verdict, a check that live confidence is calibrated)."""
    ext = reply.ext
    return {
        "completion_tokens": reply.completion_tokens, "prompt_tokens": reply.prompt_tokens,
        "cached_tokens": reply.cached_tokens, "latency_s": round(reply.latency_s, 4),
        "strategy": str(ext.get("strategy") or ""), "termination": str(ext.get("termination") or ""),
        "finish_reason": reply.finish_reason, "trace_id": str(ext.get("trace_id") or ""),
        "error": reply.error, "error_kind": reply.error_kind, "confidence": ext.get("confidence"),
    }  # fmt: skip


def gave_up(record: dict[str, Any], reply: Reply) -> dict[str, Any] | None:
    """The record as an infrastructure error when the search ended without an answer, else None."""
    if not reply.text.strip() and record["termination"] in GAVE_UP:
        return record | {"error": f"search ended by {record['termination']} without an answer",
                         "error_kind": "termination"}  # fmt: skip
    return None


async def checked(record: dict[str, Any], pool: ProblemPool, text: str, grader: CodeGrader) -> dict[str, Any]:
    """The record with the answer checked as the pools check theirs, and the content kept (so a
    record can be re-checked). Code runs on the problem's hidden tests in the sandbox, as the
    pools score code (a sandbox that cannot judge it is an infrastructure error, never wrong).
    Otherwise the gateway renders the answer in the form the question asks: when the whole
    content is that answer (a list shaped as the question's example, a bare ``True``), it is the
    answer; a number or stated answer pulled out of it otherwise."""
    problem = Problem.from_dict(pool.problem)
    if problem.check == "code":
        verdict = await check_code(problem, text, await grader.runner())
        if verdict.correct is None:
            return record | {"error": verdict.error, "error_kind": "sandbox", "content": text}
        return record | {"answer": "", "correct": verdict.correct, "content": text}
    return record | await asyncio.to_thread(text_verdict, problem, text)


def text_verdict(problem: Problem, text: str) -> dict[str, Any]:
    """``answer``, ``correct`` and ``content`` of a reply that is not code (see :func:`checked`)."""
    content = text.strip()
    answer = extract_answer(text)
    correct = answer_correct(problem, answer)
    if not correct and "\n" not in content and answer_correct(problem, content):
        answer, correct = content, True
    return {"answer": answer or "", "correct": correct, "content": text}


async def regrade(directory: Path, pools: Mapping[str, ProblemPool], grader: CodeGrader) -> int:
    """Re-check every record that kept its content with today's :func:`checked`, chunk by chunk,
    each rewritten whole with ``regraded_by`` (``git describe``) in its header; records with an
    infrastructure error stay as they are. A sandbox failure stops it with that chunk untouched.
    Returns how many verdicts changed."""
    changed = 0
    for path in chunk_paths(directory):
        header, records = read_chunk(path)
        again = []
        for record in records:
            if record.get("error") or "content" not in record:
                again.append(record)
                continue
            fresh = await checked(record | {"correct": None, "answer": ""}, pools[record["problem_id"]],
                                  record["content"], grader)  # fmt: skip
            if fresh.get("error"):
                raise LiveRunError(f"{path.name}: {record['problem_id']} could not be re-checked: {fresh['error']}")
            changed += fresh["correct"] != record.get("correct")
            again.append(fresh)
        split, seq = path.stem.rsplit("-", 1)
        kept = {k: v for k, v in header.items() if k not in ("type", "schema", "records")}
        kept |= {"regraded_by": git_describe(), "regraded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        write_records(directory, split, int(seq), kept, again)
    return changed
