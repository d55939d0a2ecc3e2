"""Every measured figure in README.md and docs/ cites the raw data it came from, so it can be checked.

The rule, enforced without reading prose:

- a *figure line* is a line outside code blocks with a number followed by a unit of measure
  (``%``, ``ms``, ``tok/s``, ``tokens/s``, ``req/s``, ``jobs/s``, a multiplication sign or ``x``), a ``±``, or a
  Spearman coefficient;
- its *section* (from its heading to the next heading of any level) must cite a raw data file:
  a path ``docs/data/...`` or ``docs/ladder/...`` (or a relative Markdown link ``](data/...)``,
  ``](ladder/...)`` from docs/): a figure whose raw data is not in the repository is
  re-measured or withdrawn, never marked as pending;
- every cited path exists.

Sections whose numbers are settings or alert thresholds rather than measurements are listed in
``NOT_MEASURED`` with the reason. Every doc is checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FIGURE = re.compile(
    r"\d(?:[.,]\d+)*\s?(?:%|ms\b|tok/s|tokens/s|req/s|jobs/s)|\d(?:\.\d+)?x\b|\d\u00d7|±\s?\d|\d\s?±"
    r"|Spearman[^\n]{0,16}?-?\d\.\d"
)
CITATION = re.compile(r"(?:^|[\s(`\[])(?:\.\./)?(docs/(?:data|ladder)/[A-Za-z0-9_.+\-/]+)")
LINK = re.compile(r"\]\(((?:data|ladder)/[A-Za-z0-9_.+\-/]+)\)")
HEADING = re.compile(r"^#{1,6} ")
# "a 95% interval" names a kind of interval, not a measured value
INTERVAL_NAME = re.compile(r"95\s?%\s(?:CI|interval|Wilson|bootstrap|confidence)", re.IGNORECASE)

# (doc, heading) -> why the numbers in that section are not measurements
NOT_MEASURED: dict[tuple[str, str], str] = {
    ("README.md", "## Settings"): (
        "generated from the settings' descriptions (make settings-table); its judge-concurrency figures are"
        " docs/verifier.md's 'Measured' ones, which cite their raw data there"
    ),
    ("docs/streaming.md", "### Batching"): "the event window's length (WINDOW_S, 50 ms), a setting",
    ("docs/observability.md", "## Traces"): "the exporter's flush interval (200 ms), a setting",
    ("docs/observability.md", "## Metrics"): "an example of why cache gauges are not summed, not a measurement",
    ("docs/deployment.md", "### Monitoring and alerts"): "alert thresholds (the Prometheus rules), not measurements",
    ("docs/deployment.md", "### Scaling"): "the bounds a unit test asserts on key movement, not a measurement",
    ("docs/loadtests.md", "## Calibration"): "the effort budgets and the prefill price, settings",
    ("docs/policy.md", "## Service behaviour"): "the deadline margin (50 ms), a setting",
    ("docs/policy.md", "## Benchmark"): "the targets the next section's results are measured against",
    ("docs/reliability.md", "## The chaos suite"): "the run's design (rates, bounds), not its results",
    (
        "docs/strategies.md",
        "## Answers module (`services/common/answers.py`)",
    ): "an example answer ('50%'), not a figure",
    (
        "docs/policy-engines.md",
        "## Measured (2-core VM shared with ~6 other engineers; load average 13\u201318 during all runs)",
    ): ("vLLM figures read by hand from e2e runs under load 13-18; no script measures them and the section says so"),
}


@dataclass(frozen=True)
class Problem:
    doc: str
    line: int
    text: str
    why: str


def docs() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def sections(text: str) -> list[tuple[str, list[tuple[int, str]]]]:
    """The doc split at headings, code blocks left out: (heading, [(line number, line)])."""
    out: list[tuple[str, list[tuple[int, str]]]] = [("", [])]
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if HEADING.match(line):
            out.append((line.strip(), []))
        else:
            out[-1][1].append((number, line))
    return out


def citations(line: str, doc: Path, root: Path) -> list[Path]:
    """The raw data paths a line cites. A path that runs into a placeholder
    (``docs/data/x/<date>.json``) says where a script writes, so it is neither a citation nor checked."""
    found = [root / m.group(1).rstrip(".") for m in CITATION.finditer(line) if not line[m.end() :].startswith("<")]
    found += [doc.parent / m.group(1).rstrip(".") for m in LINK.finditer(line)]
    return found


def check(doc: Path, root: Path = ROOT) -> list[Problem]:
    """The figure lines of ``doc`` without a citation in their section, and broken citations."""
    name = doc.relative_to(root).as_posix()
    problems: list[Problem] = []
    for heading, lines in sections(doc.read_text()):
        cited = False
        for number, line in lines:
            for path in citations(line, doc, root):
                cited = True
                if not (path.is_file() or (path.is_dir() and any(path.iterdir()))):
                    problems.append(
                        Problem(name, number, line, f"cites {path.relative_to(root)}, which does not exist")
                    )
        if cited or (name, heading) in NOT_MEASURED:
            continue
        for number, line in lines:
            if FIGURE.search(INTERVAL_NAME.sub("", line)):
                problems.append(Problem(name, number, line.strip()[:120], f"figure without raw data in '{heading}'"))
    return problems


def test_every_figure_cites_raw_data_that_exists() -> None:
    problems = [p for doc in docs() for p in check(doc)]
    assert not problems, "\n".join(f"{p.doc}:{p.line}: {p.why}: {p.text}" for p in problems)


def test_every_exception_names_a_section_that_exists() -> None:
    """A stale allow-list entry would hide nothing today but let a new uncited section in."""
    for doc, heading in NOT_MEASURED:
        headings = [h for h, _ in sections((ROOT / doc).read_text())]
        assert heading in headings, f"{doc}: no section {heading!r}"


def test_every_benchmark_writes_raw_results_under_docs_data() -> None:
    """A benchmark's figures can be cited only if it leaves raw results where the docs point."""
    silent = [
        p.name
        for p in sorted((ROOT / "benchmarks").glob("*.py"))
        if "write_raw(" not in (text := p.read_text()) and "docs/data" not in text
    ]
    assert not silent, f"benchmarks that write no raw results under docs/data/: {silent}"


def test_an_uncited_figure_fails(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    doc = tmp_path / "docs" / "bench.md"
    doc.write_text("# Bench\n\n## Results\n\nThe engine decodes 24.9 tok/s at p50 33 ms.\n\nIt has a 95% interval.\n")
    problems = check(doc, tmp_path)
    assert [p.line for p in problems] == [5]
    assert "without raw data" in problems[0].why


def test_a_cited_figure_passes_a_missing_file_fails_and_a_placeholder_is_no_citation(tmp_path: Path) -> None:
    (tmp_path / "docs" / "data" / "bench").mkdir(parents=True)
    (tmp_path / "docs" / "data" / "bench" / "run.json").write_text("{}")
    doc = tmp_path / "docs" / "bench.md"
    doc.write_text(
        "## Results\n\n24.9 tok/s ([raw](data/bench/run.json)).\n\n## Other\n\n12 ms (`docs/data/gone.json`)\n"
    )
    problems = check(doc, tmp_path)
    assert [(p.line, "does not exist" in p.why) for p in problems] == [(7, True)]
    doc.write_text("## Results\n\nwrites `docs/data/later/<date>.json` with a 95% interval, 12 ms\n")
    assert [p.why for p in check(doc, tmp_path)] == ["figure without raw data in '## Results'"]


def test_a_folder_is_a_citation_only_when_it_holds_raw_data(tmp_path: Path) -> None:
    """A note that a script will write there later cites nothing yet."""
    doc = tmp_path / "README.md"
    doc.write_text("12 ms (not yet re-measured with raw data: `benchmarks/b.py` writes `docs/data/b/`)\n")
    assert [p.why for p in check(doc, tmp_path)] == ["cites docs/data/b, which does not exist"]
    (tmp_path / "docs" / "data" / "b").mkdir(parents=True)
    assert [p.why for p in check(doc, tmp_path)] == ["cites docs/data/b, which does not exist"]
    (tmp_path / "docs" / "data" / "b" / "run.json").write_text("{}")
    assert check(doc, tmp_path) == []
