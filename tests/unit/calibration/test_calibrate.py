"""``make calibrate``'s pieces without a model: the wall-clock limit of a pool run, the lock
left alone against an engine elsewhere, family selection, and pools on disk to a table the
gateway loads with its card printed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from calibration.cli import main as cli
from calibration.lib import pool_run as run_module
from calibration.lib.drawer import DrawSettings, program_version
from calibration.lib.paths import safe_name
from calibration.lib.pool_run import PoolRun, model_sha256
from calibration.verbs.calibrate import chosen_families
from evaluation.pools.store import ProblemPool, iter_chunks, write_chunk
from evaluation.problems.datasets import Problem
from services.gateway.routing import load_routing_table
from tests.unit.evaluation.pool_fixtures import draw, pool


class SlowDrawer:
    """Draws problem ``i`` in ``delays[i]`` seconds."""

    def __init__(self, delays: dict[str, float]) -> None:
        self.delays = delays

    async def draw(self, problem: Problem, split: str) -> ProblemPool:
        await asyncio.sleep(self.delays[problem.id])
        return pool(problem.id, cot=draw("cot", ("1", True), [("1", True)]))


class FakeRun(PoolRun):
    async def _drawer(self) -> Any:
        return self._fake

    _fake: SlowDrawer | None = None


def problems(n: int) -> list[Problem]:
    return [Problem(f"p{i}", "chain_sum", 1, f"What is {i} + 1?", str(i + 1)) for i in range(n)]


def test_the_time_limit_drops_the_chunk_in_flight_and_keeps_complete_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_lock(*_: Any, **__: Any) -> Any:
        raise AssertionError("a run against an engine elsewhere must not take the model lock")

    monkeypatch.setattr(run_module, "model_lock", no_lock)
    run = FakeRun(model="remote-model", split="calibration", problems=problems(3), directory=tmp_path,
                  settings=DrawSettings(k=1), data={}, chunk_size=1, hours=0.6 / 3600, lock=False,
                  stop_at_deadline=True)  # fmt: skip
    run._fake = SlowDrawer({"p0": 0.0, "p1": 5.0, "p2": 0.0})
    assert asyncio.run(run.run()) == 1
    chunks = list(iter_chunks(tmp_path))
    assert [c.pools[0].id for c in chunks] == ["p0"]
    assert chunks[0].header["model_sha256"] == "remote:remote-model"
    # the next run resumes after the complete chunk
    again = FakeRun(model="remote-model", split="calibration", problems=problems(3), directory=tmp_path,
                    settings=DrawSettings(k=1), data={}, chunk_size=1, lock=False)  # fmt: skip
    again._fake = SlowDrawer({"p1": 0.0, "p2": 0.0})
    assert asyncio.run(again.run()) == 2
    assert sorted(p.id for c in iter_chunks(tmp_path) for p in c.pools) == ["p0", "p1", "p2"]


def test_a_model_with_no_registry_entry_or_file_is_named_as_remote() -> None:
    assert model_sha256("meta-llama/Llama-3.1-70B-Instruct") == "remote:meta-llama/Llama-3.1-70B-Instruct"
    assert len(model_sha256("smollm2-135m")) == 64


def test_families_by_name_task_kind_or_data_set() -> None:
    assert chosen_families("counting,chain_sum", "") == ["letter_counting", "count_bits", "chain_sum"]
    assert chosen_families("", "humaneval") == ["humaneval"]
    assert len(chosen_families("", "")) >= 10
    with pytest.raises(SystemExit, match="unknown family"):
        chosen_families("nope", "")
    assert safe_name("meta-llama/Llama-3.1-70B") == "meta-llama_Llama-3.1-70B"


def test_pools_on_disk_become_a_table_the_gateway_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    header = {"git_describe": "abc", "model": "m", "model_sha256": "remote:m", "program_version": program_version(),
              "settings": DrawSettings(k=2).as_dict(), "data": {"seed": 0}}  # fmt: skip
    pools = []
    for i in range(4):
        p = pool(f"p{i}", cot=draw("cot", ("1", i % 2 == 0), [("1", True), ("2", False)]),
                 program=draw("program", ("1", True), [("1", True), ("3", False)]))  # fmt: skip
        p.problem["question"] = f"What is {i} + 1?"
        pools.append(p)
    write_chunk(tmp_path / "pools", "calibration", 1, header, pools)
    code = cli(["calibrate", "--model", "org/m", "--out", str(tmp_path), "--no-draw", "--estimator", "none"])
    assert code == 0
    path = tmp_path / "routing.org_m.json"
    table = load_routing_table(path)
    route = table.route("low", None, "arithmetic")
    assert route.strategy == "program_of_thought" and route.expected is not None
    adaptive = table.route("high", None, "arithmetic")  # from medium up: the adaptive vote
    assert adaptive.strategy == "adaptive" and adaptive.n == 8 and adaptive.expected is not None
    assert route.expected.accuracy == 1.0 and route.expected.problems == 4
    assert table.route("none", None, "arithmetic").strategy == "single"
    raw = json.loads(path.read_text())
    assert raw["provenance"]["program_version"] == [program_version()] and raw["provenance"]["problems"] == 4
    predictions = json.loads((tmp_path / "routing.org_m.predictions.json").read_text())
    assert len(predictions["problems"]) == 4
    out = capsys.readouterr().out
    assert (
        "#### `arithmetic`" in out
        and "| `high` | any | `adaptive`" in out
        and "TTC_GATEWAY_ROUTING_TABLES=org/m=" in out
    )


def test_the_table_can_go_where_the_gateway_ships_it(tmp_path: Path) -> None:
    """``--table`` writes the table elsewhere (the shipped one lives beside the gateway's code);
    the predictions stay in ``--out``."""
    header = {"git_describe": "abc", "model": "m", "model_sha256": "remote:m", "program_version": program_version(),
              "settings": DrawSettings(k=2).as_dict(), "data": {"seed": 0}}  # fmt: skip
    p = pool("p0", cot=draw("cot", ("1", True), [("1", True), ("2", False)]),
             program=draw("program", ("1", True), [("1", True), ("3", False)]))  # fmt: skip
    p.problem["question"] = "What is 0 + 1?"
    write_chunk(tmp_path / "pools", "calibration", 1, header, [p])
    shipped = tmp_path / "served" / "routing.m.json"
    args = ["--model", "m", "--out", str(tmp_path), "--no-draw", "--estimator", "none", "--table", str(shipped)]
    assert cli(["calibrate", *args]) == 0
    assert load_routing_table(shipped).route("none", None, "arithmetic").strategy == "single"
    assert not (tmp_path / "routing.m.json").exists() and (tmp_path / "routing.m.predictions.json").exists()
