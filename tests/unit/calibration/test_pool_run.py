"""Pool chunks: written whole, read back equal, newest record wins; a run resumes after them."""

from __future__ import annotations

from pathlib import Path

import pytest

from calibration.lib.drawer import DrawSettings, program_version
from calibration.lib.pool_run import StaleSettings, counts, plan, remove_replaced
from evaluation.pools.store import ProblemPool, iter_chunks, read_chunk, read_pools, write_chunk
from evaluation.problems.datasets import Problem
from tests.unit.evaluation.pool_fixtures import draw, pool

SHA = "f" * 64


def header(settings: DrawSettings, version: str) -> dict[str, object]:
    return {"model_sha256": SHA, "settings": settings.as_dict(), "program_version": version, "git_describe": "x"}


def test_a_chunk_round_trips_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    p = pool("a", cot=draw("cot", ("1", True), [("1", True), ("2", False)], logprobs=[-0.1, -0.2]))
    path = write_chunk(tmp_path, "calibration", 1, {"model": "m"}, [p])
    chunk = read_chunk(path)
    assert chunk.pools == (p,) and chunk.header["problems"] == 1 and chunk.seq == 1
    assert [f.name for f in tmp_path.iterdir()] == ["calibration-00001.jsonl"]


def test_a_truncated_chunk_is_refused(tmp_path: Path) -> None:
    path = write_chunk(tmp_path, "calibration", 1, {}, [pool("a"), pool("b")])
    path.write_text("\n".join(path.read_text().splitlines()[:2]) + "\n")
    with pytest.raises(ValueError, match="header counts 2"):
        read_chunk(path)


def test_the_newest_chunk_wins_and_order_is_first_drawn(tmp_path: Path) -> None:
    write_chunk(tmp_path, "calibration", 1, {}, [pool("a", "old"), pool("b")])
    write_chunk(tmp_path, "calibration", 2, {}, [pool("a", "new")])
    pools = read_pools(tmp_path)
    assert [(p.id, p.kind) for p in pools] == [("a", "new"), ("b", "arithmetic")]


def problems(*ids: str) -> list[Problem]:
    return [Problem(i, "chain_sum", 1, f"question {i}", "1") for i in ids]


def test_a_run_resumes_after_its_chunks(tmp_path: Path) -> None:
    s, v = DrawSettings(), program_version()
    write_chunk(tmp_path, "calibration", 1, header(s, v), [pool("a"), pool("b")])
    left = plan(tmp_path, "calibration", problems("a", "b", "c"), s, v, redraw_stale=False, sha256=SHA)
    assert [p.id for p in left.todo] == ["c"] and left.next_seq == 2 and not left.stale


def test_other_settings_need_a_redraw_and_other_versions_are_kept_unless_asked(tmp_path: Path) -> None:
    s, v = DrawSettings(), program_version()
    write_chunk(tmp_path, "calibration", 1, header(DrawSettings(k=4), v), [pool("a")])
    with pytest.raises(StaleSettings, match="--redraw-stale"):
        plan(tmp_path, "calibration", problems("a"), s, v, redraw_stale=False, sha256=SHA)
    write_chunk(tmp_path, "calibration", 1, header(s, "older"), [pool("a")])
    kept = plan(tmp_path, "calibration", problems("a"), s, v, redraw_stale=False, sha256=SHA)
    assert kept.todo == [] and kept.kept_stale == 1
    redo = plan(tmp_path, "calibration", problems("a"), s, v, redraw_stale=True, sha256=SHA)
    assert [p.id for p in redo.todo] == ["a"] and len(redo.stale) == 1
    write_chunk(tmp_path, "calibration", redo.next_seq, header(s, v), [pool("a")])
    assert [p.name for p in remove_replaced(tmp_path, "calibration", redo.stale)] == ["calibration-00001.jsonl"]
    assert [c.seq for c in iter_chunks(tmp_path)] == [2]


def test_a_pool_from_another_model_is_refused(tmp_path: Path) -> None:
    s, v = DrawSettings(), program_version()
    write_chunk(tmp_path, "calibration", 1, {**header(s, v), "model_sha256": "0" * 64}, [pool("a")])
    with pytest.raises(StaleSettings, match="model sha256"):
        plan(tmp_path, "calibration", problems("a"), s, v, redraw_stale=False, sha256=SHA)


def test_counts_report_cut_and_correct_candidates() -> None:
    p = pool("a", cot=draw("cot", ("1", True), [("1", True), ("2", False)]))
    assert counts([p]) == {"problems": 1, "cot": {"candidates": 3, "cut": 0, "correct": 2, "unchecked": 0}}


def test_rescoring_recomputes_verdicts_from_stored_answers(tmp_path: Path) -> None:
    import dataclasses

    from calibration.verbs.rescore import rescore

    p = pool("a", cot=draw("cot", ("1", False), [("2", True)]))
    cands = tuple(dataclasses.replace(c, answer=c.key) for c in p.draws["cot"].candidates)
    p = dataclasses.replace(p, draws={"cot": dataclasses.replace(p.draws["cot"], candidates=cands)})
    write_chunk(tmp_path, "calibration", 1, {"model": "m"}, [p])
    assert rescore(tmp_path) == {"calibration-00001.jsonl": 2}  # reference "1": both verdicts were wrong
    chunk = read_chunk(tmp_path / "calibration-00001.jsonl")
    assert [c.correct for c in chunk.pools[0].draws["cot"].candidates] == [True, False]
    assert chunk.header["model"] == "m" and chunk.header["rescored"][0]["changed"] == 2
    assert rescore(tmp_path) == {"calibration-00001.jsonl": 0}


def test_status_and_table_read_the_chunks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from calibration.cli import main

    pools = [
        pool("a", cot=draw("cot", ("1", True), [("1", True)] * 8),
             program=draw("program", ("1", True), [("2", False)] * 8)),
        pool("b", "counting", cot=draw("cot", ("2", False), [("1", True)] * 8),
             program=draw("program", ("", False), [("1", True)] * 8)),
    ]  # fmt: skip
    write_chunk(tmp_path, "calibration", 1, {"settings": DrawSettings().as_dict()}, pools)
    assert main(["status", "--out", str(tmp_path)]) == 0
    assert "calibration: 2 problems" in capsys.readouterr().out
    out = tmp_path / "priced.json"
    assert main(["table", "--out", str(tmp_path), "--configs", "cot_greedy,sc@8", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| all | `cot_greedy` | 2 | 0.500 |" in printed and "| counting | `sc@8` | 1 | 1.000 |" in printed
    assert '"pot@9:es"' in out.read_text()


def _program_pool(question: str, programs: list[tuple[str, str]], prompt: str = "", pid: str = "a") -> ProblemPool:
    """A pool whose program draw ran ``programs`` (source, printed answer), each keyed as voting."""
    import dataclasses

    from evaluation.pools.store import Draw, PoolCandidate
    from services.common.answers import vote_key

    cands = tuple(
        PoolCandidate(
            i, i == 0, i, int(i > 0), "t", 10, False, vote_key(out), False, answer=out, program=src, status="ok"
        )
        for i, (src, out) in enumerate(programs)
    )
    base = pool(pid)
    problem = base.problem | {"question": question, "reference": "[-66.0, -23.0, 35.0]"}
    return dataclasses.replace(base, problem=problem, draws={"program": Draw("program", cands, (), prompt=prompt)})


def test_rescoring_rekeys_stored_programs_by_the_strategys_abstention_rule(tmp_path: Path) -> None:
    from calibration.verbs.rescore import rescore

    question = "Sort these numbers in ascending order: 35.0, -66.0, -23.0"
    copied = "numbers = [-69, -13, 1, 7, 11, 43, 59, 61]\nnumbers.sort()\nprint(numbers)"
    computed = "numbers = [35.0, -66.0, -23.0]\nnumbers.sort()\nprint(numbers)"
    p = _program_pool(question, [(copied, "[-69, -13, 1, 7, 11, 43, 59, 61]"), (computed, "[-66.0, -23.0, 35.0]"),
                                 ('print("[1, 2]")', "[1, 2]")])  # fmt: skip
    write_chunk(tmp_path, "calibration", 1, {"model": "m"}, [p])
    assert rescore(tmp_path) == {"calibration-00001.jsonl": 3}  # two keys dropped, one verdict now right
    chunk = read_chunk(tmp_path / "calibration-00001.jsonl")
    cands = chunk.pools[0].draws["program"].candidates
    assert [c.key != "" for c in cands] == [False, True, False] and cands[1].correct
    assert chunk.header["rescored"][0]["rekeyed"] == 2
    assert rescore(tmp_path) == {"calibration-00001.jsonl": 0}


def test_a_problem_whose_program_prompt_changed_is_drawn_again_alone(tmp_path: Path) -> None:
    from calibration.lib.drawer import messages_fingerprint, problem_messages
    from services.search.strategies import program as pot

    s, v = DrawSettings(), program_version()
    a, b = problems("a", "b")
    current = messages_fingerprint(pot.program_messages(problem_messages(a)))
    fresh = _program_pool(a.question, [], prompt=current, pid="a")
    changed = _program_pool(b.question, [], prompt="0" * 12, pid="b")
    legacy = _program_pool("question c", [], pid="c")  # drawn before prompts were kept: current
    write_chunk(tmp_path, "calibration", 1, header(s, v), [fresh, changed, legacy])
    left = plan(tmp_path, "calibration", problems("d", "a", "b", "c"), s, v, redraw_stale=False, sha256=SHA)
    assert [p.id for p in left.todo] == ["b", "d"]  # the changed one first, then what was never drawn


def test_a_draw_keeps_its_prompt_fingerprint_through_a_chunk(tmp_path: Path) -> None:
    p = _program_pool("q", [("print(6 * 7)", "42")], prompt="abc123def456")
    write_chunk(tmp_path, "calibration", 1, {}, [p])
    assert read_chunk(tmp_path / "calibration-00001.jsonl").pools[0].draws["program"].prompt == "abc123def456"
