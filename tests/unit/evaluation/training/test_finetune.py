"""LoRA fine-tuning of a tiny random Qwen2 for two optimizer steps: a run stopped after the first
step and resumed from its checkpoint ends with the very weights of an uninterrupted run (LoRA
dropout on, so the random state must come back too); the final adapter replaces the checkpoint,
and every step is logged with its loss, load average and peak memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evaluation.training.finetune import ADAPTER_WEIGHTS, train
from evaluation.training.formats import ChatMessage, SftRow
from evaluation.training.run_state import RunFolder, TrainSettings, learning_rate
from evaluation.training.sft_data import Example, batches, tokenize
from tests.unit.evaluation.training.tiny_model import tiny_base, tiny_tokenizer

SETTINGS = TrainSettings(epochs=1, batch=2, learning_rate=1e-2, warmup_steps=1, checkpoint_every=5, seed=7)


def examples() -> list[Example]:
    rows = []
    for a, b in ((8, 5), (2, 9), (7, 7), (3, 4)):
        messages = [ChatMessage(role="user", content=f"What is {a} + {b}?"),
                    ChatMessage(role="assistant", content=f"print({a} + {b})\n\\boxed{{{a + b}}}")]  # fmt: skip
        rows.append(SftRow(messages=messages, prompt_id=f"p{a}{b}", candidate_id="c", source="pool:m", family="sum",
                           task_kind="arithmetic", modality="program", completion_tokens=5))  # fmt: skip
    tokenizer = tiny_tokenizer()
    return [tokenize(r, tokenizer) for r in rows]


def weights(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return dict(load_file(str(folder / ADAPTER_WEIGHTS)))


def test_a_resumed_run_ends_with_the_weights_of_an_uninterrupted_one(tmp_path: Path) -> None:
    import torch

    base = tiny_base(tmp_path / "base")
    data = examples()
    steps = batches(len(data), SETTINGS.epochs, SETTINGS.seed, SETTINGS.batch)
    assert len(steps) == 2

    whole = RunFolder(tmp_path / "runs" / "whole")
    assert train(whole, base, "tiny", data, steps, SETTINGS) == 2

    split = RunFolder(tmp_path / "runs" / "split")
    assert train(split, base, "tiny", data, steps, SETTINGS, stop=lambda step: step >= 1) == 1
    assert split.checkpoint_step() == 1 and not split.adapter.exists()  # stopped cleanly at a checkpoint
    assert train(split, base, "tiny", data, steps, SETTINGS) == 2

    a, b = weights(whole.adapter), weights(split.adapter)
    assert a.keys() == b.keys() and len(a) == 2 * 2 * len(SETTINGS.targets)  # A and B, 2 layers, 4 projections
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(k.endswith("lora_B.weight") and bool(a[k].abs().sum() > 0) for k in a)  # it learnt something
    assert not whole.checkpoint.exists() and not split.checkpoint.exists()
    config = json.loads((whole.adapter / "adapter_config.json").read_text())
    assert config["r"] == SETTINGS.lora_r and config["base_model_name_or_path"] == "tiny"

    events = [json.loads(line) for line in split.log_path.read_text().splitlines()]
    assert [e["event"] for e in events] == ["started", "step", "checkpoint", "stopped", "resumed", "step",
                                            "checkpoint", "done"]  # fmt: skip
    stepped = [e for e in events if e["event"] == "step"]
    assert [e["step"] for e in stepped] == [1, 2] and all(e["loss"] > 0 and e["tokens"] > 0 for e in stepped)
    assert all(len(e["loadavg"]) == 3 and e["peak_rss_mb"] > 0 for e in events)


def test_the_learning_rate_warms_up_then_decays_to_zero() -> None:
    s = TrainSettings(learning_rate=1.0, warmup_steps=2)
    assert [learning_rate(step, 6, s) for step in range(6)] == [0.5, 1.0, 1.0, 0.75, 0.5, 0.25]
