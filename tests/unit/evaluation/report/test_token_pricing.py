"""Prefill and decode are recorded and priced apart: records keep prompt, cached and generated
tokens (schema-1 records, which billed judge prompts as completion tokens, are migrated when
read), reports price them apart, at the ratio calibration weighs prompt tokens with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.report.records import SCHEMA_VERSION, RecordWriter, RequestRecord, iter_records
from evaluation.report.settings import EvaluationSettings
from evaluation.report.tables import Pricing, build_rows
from evaluation.routing.types import PREFILL_WEIGHT


def record(
    strategy: str = "best_of_n:n=4:verifier=orm", *, prompt: int, completion: int, **kw: object
) -> RequestRecord:
    return RequestRecord(
        run_id="r", problem_id="p", dataset="d", level=1, split="calibration", sample=0,
        effort_requested="high", strategy_pinned=strategy, outcome="correct", correct=True, answer="1",
        prompt_tokens=prompt, completion_tokens=completion, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def v1_line(**overrides: object) -> dict[str, object]:
    data = json.loads(record(prompt=219, completion=1_864, reasoning_tokens=1_749).to_json())
    data.update({"schema": 1, "budget_used": {"generated_tokens": 373, "verifier_tokens": 1_491, "probe_tokens": 0}})
    data.pop("cached_tokens")
    data.update(overrides)
    return data


def test_schema_1_records_move_judge_tokens_to_prompt_tokens(tmp_path: Path) -> None:
    (tmp_path / "records.jsonl").write_text(json.dumps(v1_line()) + "\n")
    (old,) = list(iter_records(tmp_path))
    assert (old.prompt_tokens, old.completion_tokens, old.reasoning_tokens) == (1_710, 373, 258)
    assert old.total_tokens == 219 + 1_864  # nothing lost, nothing added
    assert old.budget_used["verifier_prompt_tokens"] == 1_491
    assert old.cached_tokens == 0 and old.schema == SCHEMA_VERSION
    # Written again, it stays migrated (and is not migrated twice).
    again = RequestRecord.from_dict(json.loads(old.to_json()))
    assert (again.prompt_tokens, again.completion_tokens) == (1_710, 373)


def test_schema_1_records_without_verifier_tokens_are_unchanged() -> None:
    plain = RequestRecord.from_dict(v1_line(budget_used={"generated_tokens": 40}))
    assert (plain.prompt_tokens, plain.completion_tokens, plain.reasoning_tokens) == (219, 1_864, 1_749)
    broken = RequestRecord.from_dict(v1_line(completion_tokens=10, budget_used={"verifier_tokens": 99}))
    assert broken.completion_tokens == 0 and broken.prompt_tokens == 229  # never negative


def test_schema_2_records_round_trip(tmp_path: Path) -> None:
    new = record(prompt=1_710, completion=373, reasoning_tokens=258, cached_tokens=64)
    new.budget_used = {"verifier_prompt_tokens": 1_491, "verifier_tokens": 1_491}  # a stray old key is ignored
    with RecordWriter(tmp_path) as writer:
        writer.write(new)
    (back,) = list(iter_records(tmp_path))
    assert back == new and back.generated_tokens == 373


def test_reports_price_prefill_and_decode_apart() -> None:
    pricing = Pricing(prompt_per_mtok=1.0, completion_per_mtok=10.0)
    rows = build_rows([record(prompt=1_000_000, completion=100_000)], pricing)
    row = next(r for r in rows if r.level == "all")
    assert row.mean_prompt_tokens == 1_000_000 and row.mean_completion_tokens == 100_000
    assert row.cost_per_correct == pytest.approx(1.0 + 1.0)


def test_prefill_weight_is_the_default_price_ratio() -> None:
    defaults = EvaluationSettings.model_fields
    ratio = defaults["price_per_mtok_prompt"].default / defaults["price_per_mtok_completion"].default
    assert ratio == pytest.approx(PREFILL_WEIGHT)
