"""``rescore``: re-check stored answers with the current checker, and re-key stored programs with the
current abstention rule, without drawing again.

A checker that learns a new spelling of a right answer (CHAMP's "…, or equivalently 252")
changes no candidate, only its verdict: every chain-of-thought and program candidate keeps
the answer it extracted, so its ``correct`` is recomputed from that answer and the chunk is
rewritten whole, its header noting when, by which code, and how many verdicts changed. Code
candidates were judged by their hidden tests in the sandbox and are left as they are.

A program's vote key is re-decided the same way from its stored source and answer
(:func:`~services.search.strategies.program_checks.program_vote`): when the strategy learns a
new kind of guessed answer (a program sorting an example's numbers instead of the question's),
the pools abstain where serving now does, and the count of keys changed joins the note.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from calibration.lib.arguments import add_pool_folder_arguments, pool_folder
from evaluation.pools.provenance import git_describe
from evaluation.pools.store import Chunk, Draw, PoolCandidate, ProblemPool, iter_chunks, write_chunk
from evaluation.problems.datasets import Problem
from evaluation.problems.problemset import answer_correct
from services.common.answers import requested_decimals
from services.search.strategies.program_checks import program_vote

NAME = "rescore"
HELP = "re-check the stored answers with the current checker (no model runs)"
_WRITTEN_BY_WRITER = ("type", "schema", "problems")


def _program_key(problem: Problem, c: PoolCandidate) -> str:
    """The key serving gives the stored program run now ("" when it abstains)."""
    if not c.program or not c.answer or c.status != "ok":
        return c.key
    key, _ = program_vote(c.program, c.answer, problem.question, requested_decimals(problem.question))
    return key


def rescore_pool(pool: ProblemPool) -> tuple[ProblemPool, int, int]:
    """The pool with current verdicts and program keys, and how many of each changed."""
    problem = Problem.from_dict(pool.problem)
    changed = rekeyed = 0
    draws: dict[str, Draw] = {}
    for name, draw in pool.draws.items():
        candidates = []
        for c in draw.candidates:
            if draw.kind != "code" and c.correct is not None:
                verdict = answer_correct(problem, c.answer or None)
                changed += verdict != c.correct
                c = dataclasses.replace(c, correct=verdict)
            if draw.kind == "program":
                key = _program_key(problem, c)
                rekeyed += key != c.key
                c = dataclasses.replace(c, key=key)
            candidates.append(c)
        draws[name] = dataclasses.replace(draw, candidates=tuple(candidates))
    return dataclasses.replace(pool, draws=draws), changed, rekeyed


def rescore_chunk(chunk: Chunk, describe: str) -> int:
    """Rewrite ``chunk`` with current verdicts and program keys when any changed; returns how
    many changed (verdicts and keys together)."""
    results = [rescore_pool(p) for p in chunk.pools]
    changed, rekeyed = sum(r[1] for r in results), sum(r[2] for r in results)
    if changed or rekeyed:
        header = {k: v for k, v in chunk.header.items() if k not in _WRITTEN_BY_WRITER}
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        note = {"git_describe": describe, "at": at, "changed": changed} | ({"rekeyed": rekeyed} if rekeyed else {})
        header["rescored"] = [*header.get("rescored", []), note]
        write_chunk(chunk.path.parent, chunk.split, chunk.seq, header, [r[0] for r in results])
    return changed + rekeyed


def rescore(directory: Path) -> dict[str, int]:
    """Chunk file name -> verdicts changed, for every chunk under ``directory``."""
    describe = git_describe()
    return {chunk.path.name: rescore_chunk(chunk, describe) for chunk in iter_chunks(directory)}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_pool_folder_arguments(p)


def run(a: argparse.Namespace) -> int:
    changed = rescore(pool_folder(a))
    print(
        f"{sum(changed.values())} verdicts changed in {sum(1 for n in changed.values() if n)} of {len(changed)} chunks"
    )
    return 0
