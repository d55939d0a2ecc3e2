"""A fine-tuning run's settings and its folder: what a run is, where it keeps its state, and the
learning-rate schedule, all without torch (the loop is :mod:`~evaluation.training.finetune`).

A run lives in ``docs/data/training/runs/<run-id>/``, small enough to commit (a LoRA adapter of
rank 8 on the attention projections of Qwen2.5-Coder-0.5B is about 4 MB in float32):

- ``run.json``: the settings, the base model and its checkpoint's fingerprint, the training file
  and its sha256, the rows used and left out, and the optimizer steps' row order;
- ``log.jsonl``: one line per optimizer step (loss, tokens, learning rate, seconds, load
  average, peak resident memory) and one per event (started, resumed, checkpoint, stopped, done);
- ``checkpoint/``: the latest checkpoint only (the adapter, ``trainer.pt`` with the optimizer
  and the random state, ``state.json`` with the step), replaced whole each time;
- ``adapter/``: the final adapter, once every step has run;
- ``merge.json``: what ``train merge`` built from it (the GGUF's path and sha256).
"""

from __future__ import annotations

import json
import os
import resource
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

RUNS = Path("docs/data/training/runs")
#: Qwen2's attention projections; LoRA on them alone keeps the adapter a few MB
ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass(frozen=True)
class TrainSettings:
    """Everything that decides the trained weights besides the data and the base model."""

    epochs: int = 2
    batch: int = 8  # rows per optimizer step (gradient accumulation; one row per forward pass)
    learning_rate: float = 2e-4
    warmup_steps: int = 3
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    targets: tuple[str, ...] = ATTENTION
    max_tokens: int = 1024  # a longer row is left out (counted), never cut
    checkpoint_every: int = 5  # optimizer steps
    seed: int = 0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["targets"] = list(self.targets)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainSettings:
        return cls(**{**data, "targets": tuple(data["targets"])})


def learning_rate(step: int, total: int, settings: TrainSettings) -> float:
    """The rate of optimizer step ``step`` (0-based): linear warm-up over ``warmup_steps``, then
    linear decay to zero at ``total``. A function of the step alone, so a resumed run needs no
    scheduler state."""
    if step < settings.warmup_steps:
        return settings.learning_rate * (step + 1) / settings.warmup_steps
    left = max(total - settings.warmup_steps, 1)
    return settings.learning_rate * max(0.0, (total - step) / left)


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MiB (Linux reports KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


@dataclass(frozen=True)
class RunFolder:
    """The files of one run (module docstring)."""

    path: Path

    @property
    def spec(self) -> Path:
        return self.path / "run.json"

    @property
    def log_path(self) -> Path:
        return self.path / "log.jsonl"

    @property
    def checkpoint(self) -> Path:
        return self.path / "checkpoint"

    @property
    def adapter(self) -> Path:
        return self.path / "adapter"

    @property
    def merge_record(self) -> Path:
        return self.path / "merge.json"

    def read_spec(self) -> dict[str, Any]:
        return dict(json.loads(self.spec.read_text()))

    def write_spec(self, spec: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_json(self.spec, spec)

    def checkpoint_step(self) -> int:
        """The step the latest checkpoint was saved after (0: none)."""
        state = self.checkpoint / "state.json"
        return int(json.loads(state.read_text())["step"]) if state.is_file() else 0

    def log(self, record: dict[str, Any]) -> None:
        """Append one line to ``log.jsonl`` with the time, the load average and peak memory."""
        line = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **record,
                "loadavg": [round(x, 2) for x in os.getloadavg()], "peak_rss_mb": peak_rss_mb()}  # fmt: skip
        self.path.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a") as out:
            out.write(json.dumps(line, sort_keys=True) + "\n")


@dataclass
class RunSpec:
    """What ``run.json`` records; a resumed run must match it in everything but the time."""

    base: str
    base_fingerprint: dict[str, Any]
    data: str
    data_sha256: str
    settings: TrainSettings
    rows: int
    left_out: dict[str, int]
    steps: list[list[int]]
    revision: str
    started_at: str

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["settings"] = self.settings.as_dict()
        return data

    def differs_from(self, recorded: dict[str, Any]) -> list[str]:
        """The fields that decide the weights and differ from a recorded ``run.json``."""
        mine = self.to_dict()
        keys = ("base", "base_fingerprint", "data_sha256", "settings", "rows", "steps")
        return [key for key in keys if mine[key] != recorded.get(key)]


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON through a temporary file and a rename."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
