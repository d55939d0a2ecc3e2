"""PRM-guided step-level search: beam search and DVTS share one engine.

A solution is a sequence of steps separated by ``step_delimiter`` (default a blank line).
Each round, every active path is expanded by ``expansion`` continuations, each generated
with the path as ``assistant_prefix`` and the delimiter as stop sequence (so one call yields
exactly one more step); the new prefixes are scored together by the PRM in one verifier
call, and each *group* keeps its ``keep`` best paths (finished paths compete too). A path is
finished when its step states a final answer, when the model has nothing more to say (an
empty step), or when it reaches ``max_tokens``. The search ends when every kept path is
finished or after ``max_steps`` rounds.

- **beam_search**: one group keeping ``beam_width`` paths; the first round samples
  ``beam_width x expansion`` first steps in one call.
- **dvts** (diverse verifier tree search): ``subtrees`` independent groups, each keeping only
  its best path; the budget is split evenly because every subtree grows in lockstep, and no
  subtree can crowd out another (diversity).

Continuations that share a prefix are generated in one batched call. An empty expansion
(the engine returned nothing) finishes the path as it stands instead of looping.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import ClassVar

from services.search.interfaces import Aggregation
from services.search.params import Params
from services.search.strategies.base import Strategy
from services.search.strategies.config import StrategyInput
from services.search.strategies.context import Context, GenRequest
from services.search.strategies.results import Choice, Outcome
from services.search.strategies.text import states_final_answer
from services.search.strategies.verifier_choice import VerifierChoice, read_verifier


@dataclass
class Path:
    text: str
    node_id: str
    tokens: int = 0
    finished: bool = False
    score: float = 0.0
    finish_reason: str = "stop"
    scored: bool = False
    passed: bool = False


@dataclass(frozen=True)
class StepConfig:
    groups: int
    keep: int
    expansion: int
    max_steps: int
    delimiter: str
    step_max_tokens: int
    verifier: VerifierChoice


def _read_step_config(spec: StrategyInput, params: Params, *, dvts: bool) -> StepConfig:
    expansion = params.integer("expansion", 2 if not dvts else 4, minimum=1, maximum=64)
    if dvts:
        default_groups = max(1, (spec.n or 8) // expansion)
        groups = params.integer("subtrees", default_groups, minimum=1, maximum=64)
        keep = 1
    else:
        groups = 1
        default_width = max(1, (spec.n or 4) // expansion)
        keep = params.integer("beam_width", default_width, minimum=1, maximum=64)
    max_steps = params.integer("max_steps", 10, minimum=1, maximum=100)
    delimiter = params.string("step_delimiter", "\n\n", non_empty=True)
    step_max_tokens = params.integer(
        "step_max_tokens", min(256, spec.sampling.max_tokens), minimum=1, maximum=spec.sampling.max_tokens
    )
    default_aggregation: Aggregation = "last"
    verifier = read_verifier(spec, params, default="prm", default_aggregation=default_aggregation)
    return StepConfig(groups, keep, expansion, max_steps, delimiter, step_max_tokens, verifier)


async def step_search(ctx: Context, cfg: StepConfig) -> Outcome:
    root = ctx.trace.root.id
    groups: list[list[Path]] = [[Path("", root)] for _ in range(cfg.groups)]
    for step in range(cfg.max_steps):
        active = [(g, p) for g, paths in enumerate(groups) for p in paths if not p.finished]
        if not active:
            break
        # Paths with the same prefix (the empty root prefix at the first step) share a call.
        by_prefix: dict[str, list[tuple[int, Path]]] = defaultdict(list)
        for g, p in active:
            by_prefix[p.text].append((g, p))
        first_round = step == 0
        requests, owners = [], []
        for prefix, members in by_prefix.items():
            per_path = cfg.expansion * (cfg.keep if first_round else 1)
            requests.append(
                GenRequest(
                    n=per_path * len(members),
                    parent_id=members[0][1].node_id,
                    action="expand",
                    assistant_prefix=prefix,
                    max_tokens=cfg.step_max_tokens,
                    stop=(cfg.delimiter,),
                    offer=False,
                    source=f"beam {step + 1}.",
                )
            )
            owners.append((members, per_path))
        results = await ctx.generate_many(requests)

        children: list[tuple[int, Path]] = []
        seen: set[tuple[int, str]] = set()
        for (members, per_path), generated in zip(owners, results, strict=True):
            for j, (g, parent) in enumerate(members):
                mine = generated[j * per_path : (j + 1) * per_path]
                grew = False
                for item in mine:
                    cand = item.candidate
                    item.node.parent_id = parent.node_id
                    if not cand.text.strip():
                        continue
                    tokens = parent.tokens + cand.completion_tokens
                    final = states_final_answer(cand.text) or tokens >= ctx.sampling.max_tokens
                    text = parent.text + cand.text
                    if not final and cand.finish_reason == "stop":
                        text += cfg.delimiter
                    key = (g, text)
                    if key in seen:  # identical continuations: score once
                        continue
                    seen.add(key)
                    grew = True
                    reason = (
                        "length" if tokens >= ctx.sampling.max_tokens and not states_final_answer(cand.text) else "stop"
                    )
                    children.append((g, Path(text, item.node.id, tokens, final, finish_reason=reason)))
                if not grew:  # empty expansion: the path ends as it stands
                    parent.finished = True
        if children:
            verdicts = await ctx.verify(cfg.verifier, [p.text for _, p in children], [p.node_id for _, p in children])
            for (_, path), verdict in zip(children, verdicts, strict=True):
                path.score, path.passed, path.scored = verdict.score, verdict.passed, True
        for g in range(cfg.groups):
            pool = [p for p in groups[g] if p.finished] + [p for gg, p in children if gg == g]
            if not pool:
                continue
            pool.sort(key=lambda p: -p.score)  # stable: earlier paths win ties
            groups[g] = pool[: cfg.keep]
        best = _best(groups)
        if best is not None:
            ctx.offer(_as_choice(best), force=True)
    best = _best(groups)
    if best is None:
        return Outcome(None)
    choice = _as_choice(best)
    ctx.offer(choice, force=True)
    solved = cfg.verifier.hard and best.passed and best.finished
    ctx.event("select", f"chose {ctx.label(best.node_id, 'path')}: {best.tokens} tokens, score {best.score:.2f}")
    return Outcome(choice, "solved" if solved else "completed")


def _best(groups: list[list[Path]]) -> Path | None:
    paths = [p for paths in groups for p in paths if p.text]
    if not paths:
        return None
    return max(paths, key=lambda p: (p.finished, p.score, -paths.index(p)))


def _as_choice(path: Path) -> Choice:
    reason = path.finish_reason if path.finished else "length"
    return Choice(path.text, path.node_id, reason, path.tokens, path.score, path.passed, path.scored)


@dataclass(frozen=True)
class BeamSearch(Strategy):
    name: ClassVar[str] = "beam_search"
    config: StepConfig

    @classmethod
    def from_input(cls, spec: StrategyInput) -> BeamSearch:
        params = Params(spec.params)
        config = _read_step_config(spec, params, dvts=False)
        params.finish()
        return cls(config)

    async def run(self, ctx: Context) -> Outcome:
        return await step_search(ctx, self.config)


@dataclass(frozen=True)
class DVTS(Strategy):
    name: ClassVar[str] = "dvts"
    config: StepConfig

    @classmethod
    def from_input(cls, spec: StrategyInput) -> DVTS:
        params = Params(spec.params)
        config = _read_step_config(spec, params, dvts=True)
        params.finish()
        return cls(config)

    async def run(self, ctx: Context) -> Outcome:
        return await step_search(ctx, self.config)
