"""``python -m calibration judge`` end to end, cheaply: two committed SmolLM2 chunks (a
products problem, the shortest chains of thought drawn, and a HumanEval one) copied into a
temporary folder are judged by the ORM through a real verifier service on a real policy
service (SmolLM2 on llama.cpp), both started by the judge itself; every chain-of-thought and
program candidate gets a score in [0, 1], the code candidates none, a second sitting finds
nothing left, and ``table`` then prices best-of-N and the weighted vote with that judge.

SmolLM2-135M is no judge of arithmetic: this checks the plumbing, not the scores."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evaluation.pools.store import read_chunk
from tests.helpers.processes import ROOT

pytestmark = pytest.mark.e2e

POOLS = ROOT / "docs" / "data" / "calibration" / "smollm2-135m" / "pools"
CHUNKS = ("calibration-00017.jsonl", "calibration-00006.jsonl")  # products; humaneval


def pools(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def test_the_judge_scores_every_cot_and_program_candidate_and_table_prices_them(tmp_path: Path) -> None:
    for name in CHUNKS:
        shutil.copy(POOLS / name, tmp_path / name)
    began = time.monotonic()
    # --no-lock: the test itself runs under the shared model lock
    judged = pools("calibration", "judge", "--out", str(tmp_path), "--judges", "orm", "--no-lock")
    seconds = time.monotonic() - began
    assert "judged 1 chunk(s)" in judged.stdout, judged.stdout
    products, code = (read_chunk(tmp_path / name) for name in CHUNKS)
    scored = [c for d in products.pools[0].draws.values() for c in d.candidates]
    assert len(scored) == 10 and all(0.0 <= c.scores["orm"] <= 1.0 for c in scored), [c.scores for c in scored]
    assert all(not c.scores for c in code.pools[0].draws["code"].candidates)
    assert (tmp_path / CHUNKS[1]).read_bytes() == (POOLS / CHUNKS[1]).read_bytes()  # nothing to judge: untouched
    (note,) = products.header["judged"]
    assert note["judge"] == "orm" and note["model"] == "smollm2-135m" and note["scored"] == 10
    # the verifier call's usage and seconds, shared out over the candidates it scored
    assert all(c.judge_tokens["orm"] > 0 and c.judge_s["orm"] > 0 for c in scored)
    assert sum(c.judge_tokens["orm"] for c in scored) == note["tokens"] > 0
    assert products.header["settings"] == read_chunk(POOLS / CHUNKS[0]).header["settings"]
    print(f"judged one problem's 10 candidates with the ORM in {seconds:.1f}s (services started included)")

    again = pools("calibration", "judge", "--out", str(tmp_path), "--judges", "orm", "--no-lock")
    assert "0 to judge" in again.stdout and "judged 0 chunk(s)" in again.stdout

    table = pools("calibration", "table", "--out", str(tmp_path), "--model", "smollm2-135m").stdout
    assert "`bon@4:orm`" in table and "`wvote@4:orm`" in table, table
