"""What a search streams while it runs: its model calls' tokens and the events between them.

The context owns one :class:`ReasoningStream` per job. Every candidate a call draws gets a
label, ``"<noun> <k>"`` (the k-th candidate of that noun in the job: "candidate 3",
"program 2", "node 5"; a noun ending in "." joins without a space: "beam 2." → "beam 2.1"),
taken in request order as the seeds are, so labels are stable within a job and a replay. Its
tokens stream under that label (kind ``tokens``); a strategy's lines between calls (a vote's
tally, a judge's scores, a program's output, an early stop) go as kind ``event``. A job with
no sink (quiet) pays for nothing but the labels. The contract: docs/streaming.md.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from services.search.interfaces import (
    CandidateTextSink,
    ProgramRun,
    ReasoningDelta,
    ReasoningKind,
    ReasoningSink,
    Verdict,
)

logger = logging.getLogger(__name__)

# A candidate's noun by the action that drew it (GenRequest.source overrides it); other
# actions name their candidates by the action itself ("program", "rollout", "tests").
NOUNS = {"generate": "candidate", "expand": "node", "refine": "revision", "think": "thinking"}


class ReasoningStream:
    """Labels candidates and hands their tokens and the search's events to the job's sink."""

    def __init__(self, sink: ReasoningSink | None) -> None:
        self._sink = sink
        self._counts: dict[str, int] = {}  # candidates named so far, by noun
        self._label_of: dict[str, str] = {}  # trace node id -> its candidate's label

    @property
    def on(self) -> bool:
        """Someone reads the stream (a quiet job has no sink)."""
        return self._sink is not None

    def labels(self, noun: str, count: int) -> list[str]:
        """The next ``count`` labels of ``noun``."""
        first = self._counts.get(noun, 0)
        self._counts[noun] = first + count
        joiner = "" if noun.endswith(".") else " "
        return [f"{noun}{joiner}{first + i + 1}" for i in range(count)]

    def name(self, node_id: str, label: str) -> None:
        """Remember that trace node ``node_id`` holds the candidate labelled ``label``."""
        self._label_of[node_id] = label

    def label(self, node_id: str, default: str = "candidate") -> str:
        """The label of the candidate recorded as trace node ``node_id``."""
        return self._label_of.get(node_id, default)

    def emit(self, source: str, kind: ReasoningKind, text: str) -> None:
        if self._sink is None or not text:
            return
        try:
            self._sink(ReasoningDelta(source, kind, text))
        except Exception:  # a broken reasoning sink must not kill the search
            logger.warning("reasoning sink failed", exc_info=True)

    def tokens(self, labels: Sequence[str]) -> CandidateTextSink | None:
        """A policy call's text sink that streams candidate ``i``'s deltas under ``labels[i]``."""
        if self._sink is None:
            return None

        async def stream(index: int, delta: str) -> None:
            if 0 <= index < len(labels):
                self.emit(labels[index], "tokens", delta)

        return stream

    def scores(self, verifier: str, node_ids: Sequence[str], verdicts: Sequence[Verdict]) -> None:
        """A judge's event: each scored candidate's label, score and pass."""
        if self._sink is None or not verdicts:
            return
        named = [self.label(n) for n in node_ids]
        if len(named) != len(verdicts):
            named = [f"candidate {i + 1}" for i in range(len(verdicts))]
        parts = [f"{n} {v.score:.2f}{' passed' if v.passed else ''}" for n, v in zip(named, verdicts, strict=True)]
        self.emit("judge", "event", f"{verifier}: " + ", ".join(parts))

    def ran(self, node_id: str, run: ProgramRun) -> None:
        """A program's event, under its candidate's label: its outcome and what it printed."""
        if self._sink is None:
            return
        if run.status == "ok":
            out = run.stdout.strip()
            line = f"ran ok in {run.wall_seconds:.2f}s, printed: {out[-500:]}" if out else "ran ok, printed nothing"
        else:
            tail = (run.stderr.strip().splitlines() or [""])[-1]
            line = f"ran: {run.status} (exit {run.exit_code}) {tail[-300:]}".rstrip()
        self.emit(self.label(node_id, "program"), "event", line)
