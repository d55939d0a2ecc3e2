"""The modality classifier in the gateway: a fixed tiny model file routes an ``open`` prompt to the
program-of-thought routes where it finds a program better, only at its efforts, only for ``open``
prompts and only when switched on; the choice and its probability reach the record and ``ttc``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from services.common.embedding import DIM
from services.common.metrics import ServiceMetrics
from services.common.task_type import classify_task
from services.gateway.formatting import report_of
from services.gateway.metrics import GatewayMetrics
from services.gateway.modality import (
    FEATURES,
    ModalityClassifier,
    load_modality_model,
    load_modality_models,
    modality_classifiers,
)
from services.gateway.planning import Planner
from services.gateway.protocol import ChatCompletionRequest
from services.gateway.routing import load_routing_table
from services.gateway.settings import GatewaySettings
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs.record import JobRecord
from tests.unit.gateway.fake_watch import ModelWatch

TABLE = Path("services/gateway/routing/routing.qwen2.5-coder-0.5b.json")
SHIPPED = Path("services/gateway/routing/modality.qwen2.5-coder-0.5b.json")
COMPUTABLE = "Reverse this list of words: apple banana cherry"
PROSE = "Write a haiku about autumn."
_METRICS = GatewayMetrics(ServiceMetrics("gateway-modality-test"))


class Encoder:
    """Feature 0 is +1 for a prompt that names a list or a string, -1 otherwise; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def embed_one(self, text: str) -> np.ndarray:
        self.calls += 1
        v = np.zeros(DIM, dtype=np.float32)
        v[0] = 1.0 if ("list" in text or "string" in text) else -1.0
        return v


def _document(**changes: Any) -> dict[str, Any]:
    """A tiny model: P(program) = sigmoid(4 x0), so 0.98 for a list or string prompt, 0.02 otherwise."""
    weights = [0.0] * DIM
    weights[0] = 4.0
    doc = {"version": 1, "enabled": True, "efforts": ["minimal", "low"], "features": FEATURES, "weights": weights,
           "bias": 0.0, "threshold": 0.9, "provenance": {"test": True}}  # fmt: skip
    return doc | changes


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "modality.m.json"
    path.write_text(json.dumps(_document()))
    return path


def _planner(model_file: Path, encoder: Encoder) -> Planner:
    table = load_routing_table(TABLE)
    classifiers = {"m": ModalityClassifier(encoder, load_modality_model(model_file, "test"))}  # type: ignore[arg-type]
    return Planner(GatewaySettings(), table, None, ModelWatch(), _METRICS, {}, modality=classifiers)  # type: ignore[arg-type]


def _chat(text: str, effort: str = "low", **extra: Any) -> ChatCompletionRequest:
    body = {"model": "m", "reasoning_effort": effort, "messages": [{"role": "user", "content": text}], **extra}
    return ChatCompletionRequest.model_validate(body)


def test_the_prompts_are_open_by_the_rules() -> None:
    assert classify_task(COMPUTABLE) == classify_task(PROSE) == "open"


@pytest.mark.parametrize("effort", ["minimal", "low"])
async def test_an_open_prompt_a_program_answers_better_is_routed_as_computable(model_file: Path, effort: str) -> None:
    encoder = Encoder()
    plan = await _planner(model_file, encoder).plan(_chat(COMPUTABLE, effort), queue_depth=0)
    table = load_routing_table(TABLE)
    assert plan.task_type == "computable" and encoder.calls == 1
    assert plan.route.strategy == table.route(effort, None, "computable").strategy == "program_of_thought"
    assert plan.modality is not None and plan.modality.modality == "program"
    assert plan.modality.program_probability == pytest.approx(1 / (1 + np.exp(-4.0)), abs=1e-6)
    assert (plan.modality.task_type_by_rule, plan.modality.threshold) == ("open", 0.9)


async def test_an_open_prompt_it_finds_prose_stays_open_and_says_so(model_file: Path) -> None:
    plan = await _planner(model_file, Encoder()).plan(_chat(PROSE), queue_depth=0)
    assert plan.task_type == "open"
    assert plan.route == load_routing_table(TABLE).route("low", None, "open")
    assert plan.modality is not None and plan.modality.modality == "thought"
    assert plan.modality.program_probability < 0.1


@pytest.mark.parametrize(
    ("text", "extra"),
    [
        (COMPUTABLE, {"reasoning_effort": "medium"}),  # not one of its efforts
        ("What is 17 + 25?", {}),  # not open: the rules already route it to a program
        (COMPUTABLE, {"ttc": {"strategy": "self_consistency", "n": 2}}),  # pinned: nothing is routed
    ],
    ids=["other-effort", "not-open", "pinned"],
)
async def test_no_decision_and_no_embedding_outside_its_scope(model_file: Path, text: str, extra: Any) -> None:
    encoder = Encoder()
    plan = await _planner(model_file, encoder).plan(_chat(text, **extra), queue_depth=0)
    assert plan.modality is None and encoder.calls == 0
    assert plan.task_type == classify_task(text)


async def test_the_choice_reaches_the_record_and_the_reply(model_file: Path) -> None:
    plan = await _planner(model_file, Encoder()).plan(_chat(COMPUTABLE), queue_depth=0)
    record = JobRecord.from_redis(plan.record("chat.completion", "anonymous", False, False).to_redis())
    assert record.task_type == "computable" and record.modality == plan.modality
    report = report_of(orchestrator_pb2.SearchResult(job_id="j", answer="x"), record).model_dump()
    assert report["task_type"] == "computable"
    assert report["modality"] == {"task_type_by_rule": "open", "program_probability": pytest.approx(0.982014, abs=1e-6),
                                  "threshold": 0.9, "modality": "program"}  # fmt: skip
    older = JobRecord.from_redis({"task_type": json.dumps("open")})  # a record written before the field
    assert older.modality is None


def test_a_switched_off_file_is_validated_and_builds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "off.json"
    path.write_text(json.dumps(_document(enabled=False)))
    models = load_modality_models(f"m={path}")
    assert not models["m"].enabled
    assert modality_classifiers(models, None) == {}  # no classifier, no encoder loaded


def test_the_shipped_file_validates() -> None:
    model = load_modality_model(SHIPPED, "shipped")
    assert model.efforts == ["minimal", "low"] and 0.5 <= model.threshold <= 1.0
    assert model.lofo["switched_on"] == model.enabled  # the file says what its figures decided
    assert Path(model.provenance["report"]).is_file()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"features": "minilm-l6-v2-mean+text-v1"}, "recalibrate"),
        ({"weights": [1.0, 2.0]}, "weights has 2 values"),
        ({"threshold": 0.3}, "threshold"),
        ({"efforts": ["extreme"]}, "efforts"),
    ],
)
def test_a_malformed_file_is_refused_at_start_up(tmp_path: Path, changes: dict[str, Any], message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_document(**changes)))
    with pytest.raises(ValueError, match=message):
        load_modality_models(f"m={path}")
    with pytest.raises(ValueError, match="cannot read"):
        load_modality_models(f"m={tmp_path / 'missing.json'}")
