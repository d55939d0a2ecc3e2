"""The replayable record of one search, and the deterministic seeds it was run with.

Every action a strategy takes (generate, expand, rollout, refine, verify, vote, select)
becomes a node with its parent, text, score, visits, seed and tokens. Node ids are assigned
in order, and seeds come from a stream derived from the job seed, so re-running a job with
the trace's seed on a deterministic engine produces the same nodes in the same order —
:func:`compare_choices` checks exactly that.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from services.common.seeds import UINT64, splitmix64
from services.gen.ttc.v1 import orchestrator_pb2


class SeedStream:
    """Per-candidate seeds derived from the job seed, in call order.

    Seeds are kept below 2**31 because engines (llama.cpp) take 32-bit seeds.
    """

    def __init__(self, job_seed: int) -> None:
        self.job_seed = job_seed & UINT64
        self._counter = 0

    def take(self, n: int) -> list[int]:
        seeds = []
        for _ in range(n):
            self._counter += 1
            seeds.append(splitmix64(self.job_seed ^ splitmix64(self._counter)) & 0x7FFFFFFF)
        return seeds

    def derive(self, label: int) -> int:
        """A seed for an auxiliary random generator (e.g. Thompson sampling), independent of
        the candidate seeds."""
        return splitmix64(self.job_seed ^ splitmix64(label ^ 0xA5A5A5A5))


@dataclass
class TraceNode:
    id: str
    parent_id: str
    action: str
    text: str = ""
    score: float = 0.0
    visits: int = 0
    seed: int = 0
    tokens: int = 0
    chosen: bool = False
    execution: orchestrator_pb2.ProgramExecution | None = None

    def to_proto(self) -> orchestrator_pb2.TraceNode:
        node = orchestrator_pb2.TraceNode(
            id=self.id,
            parent_id=self.parent_id,
            action=self.action,
            text=self.text,
            score=self.score,
            visits=self.visits,
            seed=self.seed,
            tokens=self.tokens,
            chosen=self.chosen,
        )
        if self.execution is not None:
            node.execution.CopyFrom(self.execution)
        return node

    @classmethod
    def from_proto(cls, node: orchestrator_pb2.TraceNode) -> TraceNode:
        return cls(
            id=node.id,
            parent_id=node.parent_id,
            action=node.action,
            text=node.text,
            score=node.score,
            visits=node.visits,
            seed=node.seed,
            tokens=node.tokens,
            chosen=node.chosen,
            execution=node.execution if node.HasField("execution") else None,
        )


class Trace:
    """An append-only list of nodes with sequential ids; ``root`` holds the prompt."""

    def __init__(self, prompt: str, job_seed: int) -> None:
        self.nodes: list[TraceNode] = []
        self._by_id: dict[str, TraceNode] = {}
        self.root = self.add("", "prompt", text=prompt, seed=job_seed)

    def add(
        self,
        parent_id: str,
        action: str,
        *,
        text: str = "",
        score: float = 0.0,
        seed: int = 0,
        tokens: int = 0,
        visits: int = 0,
    ) -> TraceNode:
        node = TraceNode(
            id=f"n{len(self.nodes)}",
            parent_id=parent_id,
            action=action,
            text=text,
            score=score,
            seed=seed,
            tokens=tokens,
            visits=visits,
        )
        self.nodes.append(node)
        self._by_id[node.id] = node
        return node

    def get(self, node_id: str) -> TraceNode:
        return self._by_id[node_id]

    def mark_chosen(self, node_id: str) -> None:
        """Marks the returned node and its ancestors, so the chosen path reads off the trace."""
        current: str = node_id
        while current:
            node = self._by_id.get(current)
            if node is None:
                break
            node.chosen = True
            current = node.parent_id

    def to_proto_nodes(self) -> list[orchestrator_pb2.TraceNode]:
        return [node.to_proto() for node in self.nodes]

    @classmethod
    def from_proto(cls, trace: orchestrator_pb2.SearchTrace) -> Trace:
        """Rebuild a stored trace (for inspection, comparison or rendering)."""
        if not trace.nodes:
            raise ValueError("a trace has at least its prompt node")
        root = trace.nodes[0]
        rebuilt = cls(root.text, root.seed)
        rebuilt.nodes, rebuilt._by_id = [], {}
        for node in trace.nodes:
            copy = TraceNode.from_proto(node)
            rebuilt.nodes.append(copy)
            rebuilt._by_id[copy.id] = copy
        rebuilt.root = rebuilt.nodes[0]
        return rebuilt


Choice = tuple[str, str, str, int, bool]


def choices(nodes: Iterable[TraceNode | orchestrator_pb2.TraceNode]) -> list[Choice]:
    """The decisions a run made: which node grew from which, by which action, with which seed,
    and which were chosen. Scores and texts are observations, not decisions."""
    return [(n.id, n.parent_id, n.action, int(n.seed), bool(n.chosen)) for n in nodes]


@dataclass(frozen=True)
class ReplayComparison:
    matches: bool
    first_divergence: int | None  # index of the first differing decision, None when equal
    original_decisions: int
    replayed_decisions: int
    texts_match: bool


def compare_choices(
    original: Sequence[TraceNode | orchestrator_pb2.TraceNode],
    replayed: Sequence[TraceNode | orchestrator_pb2.TraceNode],
) -> ReplayComparison:
    a, b = choices(original), choices(replayed)
    first: int | None = None
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            first = i
            break
    if first is None and len(a) != len(b):
        first = min(len(a), len(b))
    texts_match = [n.text for n in original] == [n.text for n in replayed]
    return ReplayComparison(first is None, first, len(a), len(b), texts_match)
