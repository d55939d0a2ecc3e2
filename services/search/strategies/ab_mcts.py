"""AB-MCTS (adaptive branching MCTS, Sakana's TreeQuest): wider or deeper by Thompson sampling.

Every node has a virtual GEN child. Choosing GEN at the root samples a *fresh* answer from
the original prompt (wider); choosing GEN at an answer node *refines* that answer with its
verifier feedback (deeper); choosing an existing child descends into it. Scores are verifier
scores in [0, 1]; the answer is the best-scored node.

- **ab_mcts_a** (node aggregation): at each node, GEN and CONT (all existing children
  aggregated) are two arms with Beta posteriors — GEN from the scores of the node's direct
  children, CONT from every score observed below them; if CONT wins, a child is chosen by
  Thompson sampling over its subtree's Beta posterior. Cheap conjugate updates.
- **ab_mcts_m** (mixed model): at each node, scores below child ``j`` are modelled as
  ``y ~ N(mu + b_j, sigma^2)`` with a shared ``b_j ~ N(0, tau^2)``; a short Gibbs sampler
  draws ``(mu, b, sigma^2, tau^2)`` and GEN is a new group ``mu + b_new``. Children share
  statistical strength through ``mu``/``tau`` (better with few samples, slower per step).

Why not treequest's classes directly: ``treequest.ABMCTSM`` needs PyMC/JAX (not installed
here, and far too slow for a serving path), and ``ABMCTSA`` draws from numpy's global random
state, which would break replay when several searches share a worker. This module keeps the
same ask-batch/tell shape with a per-job seeded generator. ``batch`` selections are made per
round before any result is told; GEN trials on the same node share one policy call.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from services.search.interfaces import Verdict
from services.search.params import Params
from services.search.strategies.base import Strategy
from services.search.strategies.config import StrategyInput, read_n
from services.search.strategies.context import Context, GenRequest
from services.search.strategies.results import Choice, Outcome
from services.search.strategies.revision import refine_messages
from services.search.strategies.verifier_choice import VerifierChoice, read_verifier

GEN = -1


@dataclass
class Node:
    node_id: str
    text: str = ""
    verdict: Verdict | None = None
    tokens: int = 0
    depth: int = 0
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    gen_scores: list[float] = field(default_factory=list)  # scores of children made by GEN here
    subtree_scores: list[float] = field(default_factory=list)  # own score and all below

    @property
    def score(self) -> float:
        return self.verdict.score if self.verdict is not None else 0.0


def beta_draw(rng: np.random.Generator, scores: list[float], prior: tuple[float, float] = (1.0, 1.0)) -> float:
    """Thompson draw from a Beta posterior with fractional successes (scores in [0, 1])."""
    a = prior[0] + sum(scores)
    b = prior[1] + sum(1.0 - s for s in scores)
    return float(rng.beta(a, b))


def mixed_model_draw(rng: np.random.Generator, groups: list[list[float]], iterations: int = 40) -> list[float]:
    """One posterior draw of each group's mean plus a new group's, from a Gibbs sampler for
    ``y_ij ~ N(mu + b_j, s2)``, ``b_j ~ N(0, t2)``, ``mu ~ N(0.5, 1)``, ``s2, t2 ~ InvGamma(2, 0.1)``.

    Returns ``len(groups) + 1`` values; the last is the new (GEN) group."""
    k = len(groups)
    mu, s2, t2 = 0.5, 0.05, 0.05
    b = np.zeros(k)
    n = np.array([len(g) for g in groups], dtype=float)
    sums = np.array([sum(g) for g in groups], dtype=float)
    total = float(n.sum())
    for _ in range(iterations):
        # b_j | rest
        prec = n / s2 + 1.0 / t2
        mean = ((sums - n * mu) / s2) / prec
        b = mean + rng.standard_normal(k) / np.sqrt(prec)
        # mu | rest (prior N(0.5, 1))
        prec_mu = total / s2 + 1.0
        mean_mu = (float((sums - n * b).sum()) / s2 + 0.5) / prec_mu
        mu = mean_mu + rng.standard_normal() / math.sqrt(prec_mu)
        # s2 | rest
        sse = sum(float(((np.array(g) - mu - b[j]) ** 2).sum()) for j, g in enumerate(groups))
        s2 = 1.0 / rng.gamma(2.0 + total / 2.0, 1.0 / (0.1 + sse / 2.0))
        # t2 | rest
        t2 = 1.0 / rng.gamma(2.0 + k / 2.0, 1.0 / (0.1 + float((b**2).sum()) / 2.0))
    new = mu + rng.standard_normal() * math.sqrt(t2)
    return [*(mu + b).tolist(), new]


@dataclass(frozen=True)
class _ABMCTS(Strategy):
    iterations: int
    batch: int
    max_depth: int
    verifier: VerifierChoice

    @classmethod
    def from_input(cls, spec: StrategyInput) -> _ABMCTS:
        iterations = read_n(spec, 8, maximum=512)
        params = Params(spec.params)
        batch = params.integer("batch", 4, minimum=1, maximum=64)
        max_depth = params.integer("max_depth", 4, minimum=1, maximum=32)
        verifier = read_verifier(spec, params, default="orm")
        params.finish()
        return cls(iterations, batch, max_depth, verifier)

    # -- policy of the tree (differs between A and M) -------------------------------------
    def choose(self, rng: np.random.Generator, node: Node) -> int:
        """GEN, or the index of the child to descend into."""
        raise NotImplementedError

    def _select(self, rng: np.random.Generator, root: Node) -> Node:
        node = root
        while True:
            if not node.children:
                return node
            pick = self.choose(rng, node)
            if pick == GEN:
                return node
            child = node.children[pick]
            if child.depth >= self.max_depth:
                return node  # cannot refine deeper: widen here instead
            node = child

    async def run(self, ctx: Context) -> Outcome:
        rng = np.random.default_rng(ctx.seeds.derive(0xAB))
        root = Node(ctx.trace.root.id)
        nodes: list[Node] = []
        while len(nodes) < self.iterations:
            width = min(self.batch, self.iterations - len(nodes))
            targets: dict[str, list[Node]] = defaultdict(list)
            order: list[Node] = []
            for _ in range(width):  # ask_batch: several selections before any tell
                target = self._select(rng, root)
                if target.node_id not in targets:
                    order.append(target)
                targets[target.node_id].append(target)
            requests = [
                GenRequest(
                    n=len(targets[t.node_id]),
                    parent_id=t.node_id,
                    action="generate" if t is root else "refine",
                    messages=None
                    if t is root or t.verdict is None
                    else refine_messages(ctx.problem, t.text, t.verdict),
                    offer=False,
                    source="node",
                )
                for t in order
            ]
            wider = sum(1 for t in order if t is root)
            ctx.event("search", f"round: {wider} wider, {len(order) - wider} deeper")
            results = await ctx.generate_many(requests)
            fresh: list[tuple[Node, Node]] = []
            for parent, generated in zip(order, results, strict=True):
                for g in generated:
                    child = Node(g.node.id, g.text, None, g.candidate.completion_tokens, parent.depth + 1, parent)
                    fresh.append((parent, child))
            usable = [(p, c) for p, c in fresh if c.text.strip()]
            if not usable:  # empty expansion: nothing new can be learned this round
                break
            verdicts = await ctx.verify(self.verifier, [c.text for _, c in usable], [c.node_id for _, c in usable])
            for (parent, child), verdict in zip(usable, verdicts, strict=True):  # tell
                child.verdict = verdict
                parent.children.append(child)
                parent.gen_scores.append(verdict.score)
                current: Node | None = child
                while current is not None:
                    current.subtree_scores.append(verdict.score)
                    current = current.parent
                nodes.append(child)
                ctx.trace.get(child.node_id).visits = 1
            best = self._best(nodes)
            ctx.offer(self._choice(best), force=True)
            if self.verifier.hard and best.verdict is not None and best.verdict.passed:
                return Outcome(self._choice(best), "solved")
        if not nodes:
            return Outcome(None)
        return Outcome(self._choice(self._best(nodes)))

    @staticmethod
    def _best(nodes: list[Node]) -> Node:
        return max(enumerate(nodes), key=lambda i_n: (i_n[1].score, -i_n[0]))[1]

    @staticmethod
    def _choice(node: Node) -> Choice:
        v = node.verdict
        return Choice(node.text, node.node_id, "stop", node.tokens, node.score, bool(v and v.passed), v is not None)


class ABMCTSA(_ABMCTS):
    name: ClassVar[str] = "ab_mcts_a"

    def choose(self, rng: np.random.Generator, node: Node) -> int:
        gen = beta_draw(rng, node.gen_scores)
        cont = beta_draw(rng, [s for ch in node.children for s in ch.subtree_scores])
        if gen >= cont:
            return GEN
        draws = [beta_draw(rng, ch.subtree_scores) for ch in node.children]
        return int(np.argmax(draws))


class ABMCTSM(_ABMCTS):
    name: ClassVar[str] = "ab_mcts_m"

    def choose(self, rng: np.random.Generator, node: Node) -> int:
        draws = mixed_model_draw(rng, [ch.subtree_scores or [0.5] for ch in node.children])
        pick = int(np.argmax(draws))
        return GEN if pick == len(node.children) else pick
