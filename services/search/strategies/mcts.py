"""Monte Carlo tree search over reasoning steps with PUCT selection.

One simulation: **select** from the root by ``Q(s,a) + c·P(a|s)·sqrt(N(s)) / (1 + N(s,a))``
(parent visits in the numerator, child visits in the denominator) down to a node that has
not been expanded; **expand** it with ``expansion_width`` next steps in one batched call
(stop at the step delimiter, log-probabilities on); **roll out** every new non-terminal
child to a complete solution (concurrent calls, one per child); **score** the completed
solutions in one verifier call; **back up** each score as a visit along the path to the root.

``P(a|s)`` is the softmax of the children's mean token log-probabilities (uniform when the
engine returns none). The answer follows the most-visited child from the root until a
terminal node or a leaf, and returns the best-scored complete solution found under that
node. Every expansion and rollout is a policy call — 8 simulations x 3 children ≈ 32 calls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from services.search.params import Params
from services.search.strategies.base import Strategy
from services.search.strategies.config import StrategyInput
from services.search.strategies.context import Context, GenRequest
from services.search.strategies.results import Choice, Outcome
from services.search.strategies.text import states_final_answer
from services.search.strategies.verifier_choice import VerifierChoice, read_verifier


@dataclass
class TreeNode:
    node_id: str
    prefix: str
    tokens: int
    prior: float = 1.0
    terminal: bool = False
    visits: int = 0
    value: float = 0.0
    expanded: bool = False
    children: list[TreeNode] = field(default_factory=list)
    parent: TreeNode | None = None
    # Best complete solution seen at or below this node: (score, text, tokens, node_id, passed).
    solution: tuple[float, str, int, str, bool] | None = None

    @property
    def q(self) -> float:
        return self.value / self.visits if self.visits else 0.0


def puct(parent: TreeNode, child: TreeNode, c: float) -> float:
    return child.q + c * child.prior * math.sqrt(parent.visits) / (1 + child.visits)


def priors(mean_logprobs: list[float | None]) -> list[float]:
    """Softmax of mean token log-probabilities; uniform when any is unknown."""
    if not mean_logprobs:
        return []
    if any(lp is None for lp in mean_logprobs):
        return [1.0 / len(mean_logprobs)] * len(mean_logprobs)
    values = [lp for lp in mean_logprobs if lp is not None]
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    total = sum(exps)
    return [e / total for e in exps]


@dataclass(frozen=True)
class MCTS(Strategy):
    name: ClassVar[str] = "mcts"
    simulations: int
    expansion_width: int
    c_puct: float
    delimiter: str
    step_max_tokens: int
    verifier: VerifierChoice

    @classmethod
    def from_input(cls, spec: StrategyInput) -> MCTS:
        params = Params(spec.params)
        simulations = params.integer("simulations", spec.n or 8, minimum=1, maximum=1000)
        width = params.integer("expansion_width", 3, minimum=1, maximum=64)
        c_puct = params.number("c_puct", 1.5, minimum=0.0, maximum=100.0)
        delimiter = params.string("step_delimiter", "\n\n", non_empty=True)
        step_max_tokens = params.integer(
            "step_max_tokens", min(256, spec.sampling.max_tokens), minimum=1, maximum=spec.sampling.max_tokens
        )
        verifier = read_verifier(spec, params, default="orm")
        params.finish()
        return cls(simulations, width, c_puct, delimiter, step_max_tokens, verifier)

    def _select(self, root: TreeNode) -> TreeNode:
        node = root
        while node.expanded and node.children:
            parent = node
            node = max(parent.children, key=lambda ch: (puct(parent, ch, self.c_puct), -parent.children.index(ch)))
        return node

    @staticmethod
    def _backup(node: TreeNode, value: float) -> None:
        current: TreeNode | None = node
        while current is not None:
            current.visits += 1
            current.value += value
            current = current.parent

    @staticmethod
    def _record_solution(node: TreeNode, solution: tuple[float, str, int, str, bool]) -> None:
        current: TreeNode | None = node
        while current is not None:
            if current.solution is None or solution[0] > current.solution[0]:
                current.solution = solution
            current = current.parent

    async def run(self, ctx: Context) -> Outcome:
        root = TreeNode(ctx.trace.root.id, "", 0)
        for _ in range(self.simulations):
            leaf = self._select(root)
            if leaf.terminal or (leaf.expanded and not leaf.children):
                # Nothing to expand: re-visit its known value (costs no policy call).
                self._backup(leaf, leaf.solution[0] if leaf.solution else 0.0)
                self._sync_trace(ctx, root)
                continue
            generated = await ctx.generate(
                self.expansion_width,
                parent_id=leaf.node_id,
                action="expand",
                assistant_prefix=leaf.prefix,
                max_tokens=self.step_max_tokens,
                stop=(self.delimiter,),
                logprobs=True,
                offer=False,
            )
            leaf.expanded = True
            usable, seen = [], set()
            for g in generated:
                if g.text.strip() and g.text not in seen:
                    seen.add(g.text)
                    usable.append(g)
            if not usable:  # empty expansion: the leaf is as complete as it gets
                leaf.terminal = True
                continue
            ps = priors([g.candidate.mean_logprob for g in usable])
            children = []
            for g, p in zip(usable, ps, strict=True):
                tokens = leaf.tokens + g.candidate.completion_tokens
                terminal = states_final_answer(g.text) or tokens >= ctx.sampling.max_tokens
                prefix = leaf.prefix + g.text + ("" if terminal else self.delimiter)
                children.append(TreeNode(g.node.id, prefix, tokens, prior=p, terminal=terminal, parent=leaf))
            leaf.children = children
            # Roll every non-terminal child out to a complete solution, concurrently.
            rollout_nodes = [ch for ch in children if not ch.terminal]
            rollouts = await ctx.generate_many(
                [
                    GenRequest(
                        n=1,
                        parent_id=ch.node_id,
                        action="rollout",
                        assistant_prefix=ch.prefix,
                        max_tokens=max(1, ctx.sampling.max_tokens - ch.tokens),
                        offer=False,
                    )
                    for ch in rollout_nodes
                ]
            )
            completions: dict[str, tuple[str, int, str]] = {}
            for ch, result in zip(rollout_nodes, rollouts, strict=True):
                if result:
                    completions[ch.node_id] = (
                        ch.prefix + result[0].text,
                        ch.tokens + result[0].candidate.completion_tokens,
                        result[0].node.id,
                    )
                else:
                    completions[ch.node_id] = (ch.prefix, ch.tokens, ch.node_id)
            for ch in children:
                if ch.terminal:
                    completions[ch.node_id] = (ch.prefix, ch.tokens, ch.node_id)
            texts = [completions[ch.node_id][0] for ch in children]
            verdicts = await ctx.verify(self.verifier, texts, [completions[ch.node_id][2] for ch in children])
            for ch, verdict in zip(children, verdicts, strict=True):
                text, tokens, solution_node = completions[ch.node_id]
                self._record_solution(ch, (verdict.score, text, tokens, solution_node, verdict.passed))
                self._backup(ch, verdict.score)
            self._sync_trace(ctx, root)
            choice = self._answer(root)
            if choice is not None:
                ctx.offer(choice, force=True)
        choice = self._answer(root)
        if choice is None:
            return Outcome(None)
        ctx.offer(choice, force=True)
        return Outcome(choice, "solved" if self.verifier.hard and choice.passed else "completed")

    @staticmethod
    def _answer(root: TreeNode) -> Choice | None:
        node = root
        while node.children and not node.terminal:
            node = max(node.children, key=lambda ch: (ch.visits, ch.q, -node.children.index(ch)))
        solution = node.solution or root.solution
        if solution is None:
            return None
        score, text, tokens, node_id, passed = solution
        return Choice(text, node_id, "stop", tokens, score, passed, True)

    @staticmethod
    def _sync_trace(ctx: Context, root: TreeNode) -> None:
        stack = [root]
        while stack:
            node = stack.pop()
            trace_node = ctx.trace.get(node.node_id)
            trace_node.visits = node.visits
            if node is not root:
                trace_node.score = node.q
            stack.extend(node.children)
