"""Code chosen by running it: candidates clustered by what they do on model-written inputs.

A user asking for a function rarely sends tests, and a vote on code text means nothing (two
right programs rarely look alike). What does mean something is behaviour: sample ``n``
functions (greedy first), have the model write test cases for the same function (one more
policy call, CodeT, Chen et al. 2022), run every candidate on those inputs in the sandbox (one
execution per candidate, all inputs), and group candidates whose results and exceptions are
identical (AlphaCode, Li et al. 2022). The answer comes from the largest group; ties go to the
group passing more of the model's assertions, then to the judge (when a verifier is
configured), then to the shortest candidate. A candidate that crashes on every input abstains.
With ``select: dual_agreement`` candidates are grouped by the assertions they pass and ranked
by CodeT's score (candidates x assertions). Tests the user sends (``params.code.tests``) are
run by the ``code_tests`` verifier and rank first.

The inputs are only ever literals (``code_behaviour.parse_tests``); the model's code and its
tests run only in the sandbox. Every call goes through the ``Context``: tokens, sandbox runs
and verifier calls count against the budget, and the trace holds the candidates (with their
runs), the test text, the parsed inputs and the clusters.

The chosen answer's confidence signals (:mod:`~.signals`, family ``code_clusters``): its
cluster's share of the ``n`` candidates, the clusters as distinct answers, the candidates with
nothing to run as abstentions. The pools' code vote groups equal source text, not behaviour, so
this family is not fitted and takes the documented fallback. Without parsed inputs there is no
behaviour to compare and the signals are absent.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass
from typing import ClassVar, Literal

from services.common.confidence import ConfidenceSignals
from services.common.errors import InvalidArgument
from services.search.interfaces import Message
from services.search.params import Params
from services.search.strategies.base import Strategy
from services.search.strategies.code_behaviour import (
    Behaviour,
    Case,
    Cluster,
    Entry,
    called_name,
    clusters,
    context_imports,
    dual_agreement,
    parse_tests,
    problem_entry_point,
    tied_with_first,
)
from services.search.strategies.code_harness import parse_run, runnable
from services.search.strategies.config import StrategyInput, read_n
from services.search.strategies.context import Context, Generated, GenRequest
from services.search.strategies.results import Choice, Outcome
from services.search.strategies.signals import CODE_CLUSTERS, vote_signals
from services.search.strategies.text import question_text
from services.search.strategies.verifier_choice import VerifierChoice, read_verifier

Select = Literal["clusters", "dual_agreement"]
SELECTS: tuple[str, ...] = ("clusters", "dual_agreement")
JUDGES = ("orm", "prm", "ensemble")
TESTS_SYSTEM = (
    "You write test cases for a Python function. Reply with one ```python code block of assert statements, "
    "one per line, each calling the function with literal arguments and comparing the result with the literal "
    "value it must return: assert name(arguments) == expected. Cover typical cases and edge cases. Write no "
    "function definition, no imports, no comments and no explanation."
)
TESTS_MAX_TOKENS = 400


EVIDENCE_INPUTS = 6  # inputs listed in the reply's reasoning (the trace holds them all)


def tests_messages(question: str, entry: str | None, count: int) -> tuple[Message, ...]:
    """The test-writing prompt: the user's problem, then what to write (calls to ``entry``)."""
    name = f"`{entry}`" if entry else "the function"
    return (
        Message("system", TESTS_SYSTEM),
        Message("user", f"{question}\n\nWrite {count} different test cases for {name} as assert statements."),
    )


def describe(test: Case, entry: str | None) -> str:
    call = f"{entry or 'f'}({test.args})"
    return f"{call} == {test.expected}" if test.expected is not None else call


def evidence(candidates: int, inputs: list[str], ranked: list[Cluster], user_tests: bool = False) -> str:
    """What chose the answer, for the reply's reasoning: the inputs run and the clusters, best
    first (the chosen one's cluster leads)."""
    if not ranked:
        return f"None of the {candidates} candidate(s) had a function to run; the first one answers, unverified."
    if not inputs:
        return f"The model wrote no test input to run the {candidates} candidate(s) on; the shortest answers."
    shown = "".join(f"\n- {line}" for line in inputs[:EVIDENCE_INPUTS])
    more = f"\n- ... and {len(inputs) - EVIDENCE_INPUTS} more" if len(inputs) > EVIDENCE_INPUTS else ""
    sizes = ", ".join(str(len(c.members)) for c in ranked)
    top = ranked[0].best
    user = f"; it passed {top.user_score:.0%} of your tests" if user_tests else ""
    return (
        f"{candidates} candidate(s) were sampled and run in the sandbox on {len(inputs)} model-written input(s):"
        f"{shown}{more}\nCandidates grouped by identical behaviour: clusters of {sizes}, best first. The answer is "
        f"from the first ({len(ranked[0].members)} candidate(s)) and passed "
        f"{top.behaviour.assertions_passed} model-written assertion(s){user}."
    )


def cluster_signals(candidates: int, ranked: list[Cluster]) -> ConfidenceSignals | None:
    """The first cluster's signals: each candidate a ballot keyed by its cluster ("" for one
    that did not run), so the share is the first cluster's size over ``candidates``."""
    keys = [str(rank + 1) for rank, cluster in enumerate(ranked) for _ in cluster.members]
    keys += [""] * (candidates - len(keys))
    return vote_signals(CODE_CLUSTERS, keys, [1.0] * len(keys), "1" if ranked else "")


@dataclass(frozen=True)
class CodeExecution(Strategy):
    name: ClassVar[str] = "code_execution"
    n: int = 8
    tests: int = 8
    select: Select = "clusters"
    input_timeout_s: float = 1.0
    timeout_s: float = 20.0
    entry_point: str = ""
    user_tests: VerifierChoice | None = None
    judge: VerifierChoice | None = None

    @classmethod
    def from_input(cls, spec: StrategyInput) -> CodeExecution:
        n = read_n(spec, 8, maximum=64)
        params = Params(spec.params)
        judge: VerifierChoice | None = None
        if spec.verifier:
            chosen = read_verifier(spec, params, default=spec.verifier)
            if chosen.name not in (*JUDGES, "code_tests"):
                raise InvalidArgument(
                    f"code_execution takes the code_tests verifier or a judge ({', '.join(JUDGES)}), "
                    f"not {chosen.name!r}",
                    field="strategy.verifier",
                )
            code = chosen.code
            judge = chosen if chosen.name in JUDGES else None
        else:
            code = params.mapping("code")
        entry = str((code or {}).get("entry_point") or (code or {}).get("entryPoint") or "")
        if entry and not entry.isidentifier():
            raise InvalidArgument("must be a Python identifier", field="strategy.params.code.entry_point")
        user_tests = VerifierChoice("code_tests", code=code) if code and code.get("tests") else None
        strategy = cls(
            n=n,
            tests=params.integer("tests", 8, minimum=1, maximum=32),
            select=params.string("select", "clusters", choices=SELECTS),  # type: ignore[arg-type]
            input_timeout_s=params.number("input_timeout_s", 1.0, minimum=0.05, maximum=10.0),
            timeout_s=params.number("timeout_s", 20.0, minimum=1.0, maximum=120.0),
            entry_point=entry,
            user_tests=user_tests,
            judge=judge,
        )
        params.finish()
        return strategy

    async def run(self, ctx: Context) -> Outcome:
        question = question_text(ctx.problem)
        entry = self.entry_point or problem_entry_point(question)
        root = ctx.trace.root.id
        # The greedy candidate alone first: a policy that fails at once fails before more is spent.
        candidates = await ctx.generate(1, parent_id=root, temperature=0.0)
        requests = [GenRequest(self.n - 1, root, "generate")] if self.n > 1 else []
        max_tokens = min(ctx.sampling.max_tokens, TESTS_MAX_TOKENS)
        messages = tests_messages(question, entry, self.tests)
        requests.append(GenRequest(1, root, "tests", messages=messages, max_tokens=max_tokens, temperature=0.0,
                                   offer=False, shaped=False))  # fmt: skip
        drawn = await ctx.generate_many(requests)
        candidates += [g for batch in drawn[:-1] for g in batch]
        written = drawn[-1][0] if drawn[-1] else None
        text = written.text if written is not None else ""
        entry = entry or called_name(text)
        tests = parse_tests(text, entry, self.tests)
        ctx.trace.add(
            written.node.id if written is not None else root, "inputs",
            text="\n".join(describe(t, entry) for t in tests), visits=len(tests),
        )  # fmt: skip
        ctx.event("tests", f"running {len(candidates)} candidate(s) on {len(tests)} generated input(s)")
        imports = context_imports(question)
        calls = (self._execute(ctx, i, g, entry, tests, imports) for i, g in enumerate(candidates))
        runs = await asyncio.gather(*calls)
        entries = [e for e in runs if e is not None]
        await self._user_tests(ctx, candidates, entries)
        ranked = dual_agreement(entries) if self.select == "dual_agreement" else clusters(entries)
        ranked = await self._judge(ctx, candidates, ranked)
        outcome = await self._decide(ctx, candidates, entries, ranked, observed=bool(tests))
        if outcome.choice is not None:
            inputs = [describe(t, entry) for t in tests]
            outcome.choice.evidence = evidence(len(candidates), inputs, ranked, self.user_tests is not None)
        return outcome

    async def _execute(
        self, ctx: Context, index: int, generated: Generated, entry: str | None, tests: list[Case], imports: str
    ) -> Entry | None:
        """Run one candidate on every input (one sandbox execution); None when it has no
        function to call (it abstains without spending a run)."""
        ready = runnable(generated.text, entry, tests, imports=imports, input_timeout_s=self.input_timeout_s,
                         timeout_s=self.timeout_s)  # fmt: skip
        if ready is None:
            return None
        if not tests:  # nothing to observe: every candidate with a function behaves alike
            return Entry(index, ready.length, Behaviour((), ()))
        run = await ctx.run_program(ready.program, generated.node.id, wall_seconds=ready.wall_seconds)
        behaviour = parse_run(run.stdout, len(tests))
        execution = ctx.trace.get(generated.node.id).execution
        if execution is not None:  # the behaviour's fingerprint: equal for candidates of one cluster
            execution.answer = hashlib.sha256("\n".join(behaviour.results).encode()).hexdigest()[:12]
        return Entry(index, ready.length, behaviour)

    async def _user_tests(self, ctx: Context, candidates: list[Generated], entries: list[Entry]) -> None:
        """Score every runnable candidate on the user's tests (one verifier call)."""
        if self.user_tests is None or not entries:
            return
        chosen = [candidates[e.index] for e in entries]
        verdicts = await ctx.verify(self.user_tests, [g.text for g in chosen], [g.node.id for g in chosen])
        for entry, verdict in zip(entries, verdicts, strict=True):
            entry.user_score = verdict.score

    async def _judge(self, ctx: Context, candidates: list[Generated], ranked: list[Cluster]) -> list[Cluster]:
        """Let the judge separate the clusters tied with the first (size and assertions)."""
        tied = tied_with_first(ranked) if self.select == "clusters" else []
        if self.judge is None or len(tied) < 2:
            return ranked
        ctx.event("judge", f"{len(tied)} clusters tie; asking the {self.judge.name} judge")
        best = [candidates[c.best.index] for c in tied]
        verdicts = await ctx.verify(self.judge, [g.text for g in best], [g.node.id for g in best])
        for cluster, verdict in zip(tied, verdicts, strict=True):
            cluster.best.judge = verdict.score
        return sorted(ranked, key=lambda c: c.key(), reverse=True)

    async def _decide(
        self, ctx: Context, candidates: list[Generated], entries: list[Entry], ranked: list[Cluster], *,
        observed: bool = True,
    ) -> Outcome:  # fmt: skip
        root = ctx.trace.root.id
        runnable = len(entries) or 1
        for rank, cluster in enumerate(ranked):
            best = cluster.best
            ctx.trace.add(
                root, "cluster", score=len(cluster.members) / runnable, visits=len(cluster.members),
                text=f"cluster {rank + 1}: candidates {[e.index + 1 for e in cluster.members]}, "
                f"{best.behaviour.assertions_passed} assertion(s) passed, user tests {best.user_score:.2f}",
            )  # fmt: skip
        if not ranked:
            first = next((g for g in candidates if g.text.strip()), None)
            ctx.event("select", "no candidate ran on the inputs; answering with the first candidate")
            if first is None:
                return Outcome(None)
            choice = first.choice()
            ctx.offer(choice, force=True)
            return Outcome(choice)
        ctx.ranking = [self._choice(candidates, c, runnable) for c in ranked]
        choice = ctx.ranking[0]
        if observed:
            choice.signals = cluster_signals(len(candidates), ranked)
        ctx.offer(choice, force=True)
        top = ranked[0]
        abstained = len(candidates) - sum(len(c.members) for c in ranked)
        ctx.event(
            "select",
            f"chose {ctx.label(candidates[top.best.index].node.id)}: its cluster holds {len(top.members)} of "
            f"{len(candidates)} candidate(s) ({len(ranked)} cluster(s); {abstained} abstained)",
        )
        solved = self.user_tests is not None and top.best.user_score >= 1.0
        return Outcome(choice, "solved" if solved else "completed")

    def _choice(self, candidates: list[Generated], cluster: Cluster, runnable: int) -> Choice:
        best = cluster.best
        if self.user_tests is not None:
            return candidates[best.index].choice(
                score=best.user_score, passed=best.user_score >= 1.0, scored=True, votes=len(cluster.members)
            )
        return candidates[best.index].choice(score=len(cluster.members) / runnable, votes=len(cluster.members))
