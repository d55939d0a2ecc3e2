"""Program or chain of thought for a prompt the task-type rules call ``open``: a zero-token classifier.

The rules (``services/common/task_type.py``) route what they recognize as computable to programs
and leave everything else ``open``, to chains of thought, though many such prompts are computed
exactly by a program ("Reverse this list of words: ..."). At the efforts a model file names
(``minimal`` and ``low``), an ``open`` prompt's MiniLM embedding goes through a logistic
regression fitted on the calibration pools (``python -m calibration modality``,
``evaluation/routing/modality.py``): where the probability that a program answers better reaches
the file's threshold, the prompt is routed as ``computable`` (the table's program-of-thought
routes), else as ``open``. No tokens: the numpy encoder runs in the gateway process.

The file says whether the classifier is switched on: calibration switches it on only where, judged
leave one family out, its switch beats the rule on ``open`` prompts and its choices beat the base
rate. A model file that is switched off is still read and validated at start-up, so turning it on
is a calibration run, not a code change; while off, no prompt is embedded for it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from services.common.embedding import DIM, Encoder
from services.common.task_type import TaskType
from services.gateway.fleet import parse_pairs
from services.gateway.model_tables import shipped_path
from services.gateway.protocol import Effort
from services.gateway.tracing import tracer
from services.jobs.record import ModalityChoice

SETTING = "TTC_GATEWAY_MODALITY_MODELS"
# The feature layout the weights apply to: the encoder's unit-norm mean-pooled embedding.
FEATURES = "minilm-l6-v2-mean"
RULE_TASK: TaskType = "open"  # the rules' default the classifier may replace ...
PROGRAM_TASK: TaskType = "computable"  # ... with the routes of this task type
DEFAULT_EFFORTS: tuple[Effort, ...] = ("minimal", "low")


class ModalityModel(BaseModel):
    """One model's classifier as calibration wrote it: P(program better) = sigmoid(x · weights + bias)."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(..., ge=1)
    description: str = ""
    enabled: bool = Field(..., description="Calibration's verdict: whether the switch is served.")
    efforts: list[Effort] = Field(default_factory=lambda: list(DEFAULT_EFFORTS), min_length=1)
    features: str = Field(..., description=f"The feature layout, {FEATURES!r}.")
    weights: list[float]
    bias: float
    threshold: float = Field(..., ge=0.5, le=1.0, description="Switch to a program at this probability or above.")
    provenance: dict[str, Any] = Field(default_factory=dict)
    lofo: dict[str, Any] = Field(default_factory=dict, description="The leave-one-family-out figures.")

    @model_validator(mode="after")
    def _layout(self) -> ModalityModel:
        if self.features != FEATURES:
            raise ValueError(f"features is {self.features!r}, but this gateway computes {FEATURES!r}: recalibrate")
        if len(self.weights) != DIM:
            raise ValueError(f"weights has {len(self.weights)} values; the embedding has {DIM}")
        return self


class ModalityClassifier:
    """A switched-on model and the encoder it reads prompts with (shared with the difficulty estimator)."""

    def __init__(self, encoder: Encoder, model: ModalityModel) -> None:
        self.encoder = encoder
        self.model = model
        self.weights = np.asarray(model.weights)

    def applies(self, effort: Effort, task: TaskType) -> bool:
        """Whether the classifier decides this request: an ``open`` prompt at one of its efforts."""
        return task == RULE_TASK and effort in self.model.efforts

    def probability(self, text: str) -> float:
        """P(a program answers ``text`` better than a chain of thought)."""
        z = float(self.encoder.embed_one(text) @ self.weights) + self.model.bias
        return 0.5 * (1.0 + float(np.tanh(0.5 * z)))

    def choice(self, probability: float) -> ModalityChoice:
        modality: Literal["program", "thought"] = "program" if probability >= self.model.threshold else "thought"
        return ModalityChoice(
            task_type_by_rule=RULE_TASK,
            program_probability=round(probability, 6),
            threshold=self.model.threshold,
            modality=modality,
        )

    async def route(self, effort: Effort, task: TaskType, text: str) -> tuple[TaskType, ModalityChoice | None]:
        """The task type to route as and the choice, where the classifier decides the request
        (:meth:`applies`); elsewhere ``task`` as it is, no choice, and nothing embedded."""
        if not self.applies(effort, task):
            return task, None
        with tracer.start_as_current_span("gateway/modality") as span:
            # Milliseconds of numpy (which releases the GIL): off the event loop, as the estimator does.
            choice = self.choice(await asyncio.to_thread(self.probability, text))
            span.set_attributes(
                {"ttc.modality": choice.modality, "ttc.modality.probability": choice.program_probability}
            )
        return PROGRAM_TASK if choice.modality == "program" else RULE_TASK, choice


def load_modality_model(path: str | Path, what: str) -> ModalityModel:
    """Read and validate one model file; ``ValueError`` naming ``what`` and the path."""
    try:
        return ModalityModel.model_validate(json.loads(shipped_path(path).read_text()))
    except OSError as err:
        raise ValueError(f"{what}: cannot read the modality model {str(path)!r}: {err.strerror or err}") from err
    except (json.JSONDecodeError, ValidationError) as err:
        raise ValueError(f"{what}: the modality model {str(path)!r} is invalid: {err}") from err


def load_modality_models(spec: str) -> dict[str, ModalityModel]:
    """Every ``model=path`` pair of ``spec`` (``TTC_GATEWAY_MODALITY_MODELS``), read at start-up."""
    return {model: load_modality_model(path, f"{SETTING} (model {model!r})")
            for model, path in parse_pairs(spec, SETTING).items()}  # fmt: skip


def modality_classifiers(models: Mapping[str, ModalityModel], encoder: Encoder | None) -> dict[str, ModalityClassifier]:
    """A classifier per served model whose file is switched on (the packaged encoder when none is given)."""
    enabled = {model: m for model, m in models.items() if m.enabled}
    if not enabled:
        return {}
    shared = encoder or Encoder.packaged()
    return {model: ModalityClassifier(shared, m) for model, m in enabled.items()}
