"""The reasoning a search streams, as text a reader can follow: one header line per change of source.

A search interleaves its parts (candidate 1's tokens, then candidate 3's, then a vote's tally), so
each stretch of text from a new ``source`` starts with a short header (``"\\n[candidate 2] "``),
and an event line (``kind`` "event": a program's output, a judge's score) stands on its own line.
Chat Completions and the Responses API both render with :class:`Labels`; each chunk also carries
the structured label (``{"source", "kind"}``) for clients that tell the parts apart by field.
"""

from __future__ import annotations

TOKENS, EVENT = "tokens", "event"


class Labels:
    """Tracks the last source and line end of one stream's reasoning text."""

    def __init__(self) -> None:
        self.source: str | None = None
        self.at_line_start = True

    def text(self, source: str, kind: str, text: str) -> str:
        """``text`` as it goes on the stream: a header first when the source changed, and an
        event as one whole line."""
        out = ""
        if source != self.source:
            out += ("" if self.source is None else "\n") + f"[{source}] "
            self.source = source
        elif kind == EVENT and not self.at_line_start:
            out += "\n"
        out += text
        if kind == EVENT and not text.endswith("\n"):
            out += "\n"
        if out:
            self.at_line_start = out.endswith("\n")
        return out
