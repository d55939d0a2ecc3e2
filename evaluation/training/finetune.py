"""LoRA fine-tuning on the CPU that stops and resumes at any checkpoint with the same result.

One forward pass per row (no padding), the loss summed over the row's trained tokens and
divided by the trained tokens of the whole optimizer step, so a step's loss is the token mean
of its batch whatever the rows' lengths. The language-model head is applied only at the
positions whose next token is trained (``logits_to_keep``): the head is a quarter of the
0.5B's weights and most positions are prompt. Float32 throughout (bfloat16 matrix products run
at a fiftieth of the speed on CPUs without bfloat16 units).

Resuming gives the weights an uninterrupted run gives (a unit test holds it to the bit): the
checkpoint holds the adapter, the optimizer's state, the random generator's state (LoRA
dropout draws from it) and the step; the batches come from ``run.json``; the learning rate is a
function of the step (:func:`~evaluation.training.run_state.learning_rate`).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from evaluation.training.run_state import RunFolder, TrainSettings, learning_rate, write_json
from evaluation.training.sft_data import IGNORE, Example

ADAPTER_WEIGHTS = "adapter_model.safetensors"
TRAINER_STATE = "trainer.pt"


def lora_model(base_dir: Path, settings: TrainSettings) -> Any:
    """The base checkpoint in float32 with fresh LoRA layers on ``settings.targets`` (their
    initialization seeded by ``settings.seed``), in training mode."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    torch.manual_seed(settings.seed)
    config = LoraConfig(r=settings.lora_r, lora_alpha=settings.lora_alpha, lora_dropout=settings.lora_dropout,
                        target_modules=list(settings.targets), task_type="CAUSAL_LM")  # fmt: skip
    model = get_peft_model(base, config)
    model.train()
    return model


def row_loss(model: Any, example: Example) -> Any:
    """The summed cross-entropy of the row's trained tokens (a scalar tensor)."""
    import torch
    import torch.nn.functional as F

    positions = [t for t in range(len(example.labels) - 1) if example.labels[t + 1] != IGNORE]
    if not positions:
        return torch.zeros(())
    targets = torch.tensor([example.labels[t + 1] for t in positions])
    out = model(input_ids=torch.tensor([example.input_ids]), logits_to_keep=torch.tensor(positions))
    return F.cross_entropy(out.logits[0], targets, reduction="sum")


def save_adapter(model: Any, folder: Path, base: str) -> None:
    """The LoRA weights (safetensors) and their ``adapter_config.json`` (naming the base by its
    registry name, not by this machine's path), as ``PeftModel.from_pretrained`` reads them."""
    import copy

    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    save_file(get_peft_model_state_dict(model), str(folder / ADAPTER_WEIGHTS))
    config = copy.copy(model.peft_config["default"])
    config.base_model_name_or_path = base
    config.save_pretrained(str(folder))


def load_adapter(model: Any, folder: Path) -> None:
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    result: Any = set_peft_model_state_dict(model, load_file(str(folder / ADAPTER_WEIGHTS)))
    if result.unexpected_keys:
        raise RuntimeError(f"{folder}: adapter weights the model has no place for: {result.unexpected_keys[:3]}")


def save_checkpoint(run: RunFolder, model: Any, optimizer: Any, step: int, steps: Sequence[Sequence[int]],
                    base: str) -> None:  # fmt: skip
    """Replace the run's checkpoint with one after ``step``: written beside it, then renamed."""
    import torch

    staging = run.path / "checkpoint.partial"
    shutil.rmtree(staging, ignore_errors=True)
    save_adapter(model, staging, base)
    torch.save({"optimizer": optimizer.state_dict(), "rng": torch.get_rng_state()}, staging / TRAINER_STATE)
    write_json(staging / "state.json", {"step": step, "steps": [list(s) for s in steps]})
    old = run.path / "checkpoint.old"
    shutil.rmtree(old, ignore_errors=True)
    if run.checkpoint.exists():
        run.checkpoint.rename(old)
    staging.rename(run.checkpoint)
    shutil.rmtree(old, ignore_errors=True)


def load_checkpoint(run: RunFolder, model: Any, optimizer: Any, steps: Sequence[Sequence[int]]) -> int:
    """Restore the adapter, optimizer and random state; return the step it was saved after."""
    import torch

    state = json.loads((run.checkpoint / "state.json").read_text())
    if state["steps"] != [list(s) for s in steps]:
        raise RuntimeError(f"{run.checkpoint}: its row order is not the run's")
    load_adapter(model, run.checkpoint)
    saved = torch.load(run.checkpoint / TRAINER_STATE, weights_only=True)
    optimizer.load_state_dict(saved["optimizer"])
    torch.set_rng_state(saved["rng"])
    return int(state["step"])


def train(
    run: RunFolder,
    base_dir: Path,
    base: str,
    examples: Sequence[Example],
    steps: Sequence[Sequence[int]],
    settings: TrainSettings,
    *,
    stop: Callable[[int], bool] = lambda step: False,
    hold: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> int:
    """Run the optimizer steps ``steps`` (row indices into ``examples``) from the run's latest
    checkpoint, if any, checkpointing every ``settings.checkpoint_every`` steps and whenever
    ``stop(step)`` says to stop (then it returns); on the last step the final adapter is
    written and the checkpoint removed. Each stretch between checkpoints runs inside ``hold()``
    (the shared model lock). Returns the steps completed so far."""
    import torch

    model = lora_model(base_dir, settings)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=settings.learning_rate, weight_decay=settings.weight_decay)
    step = load_checkpoint(run, model, optimizer, steps) if run.checkpoint.is_dir() else 0
    run.log({"event": "resumed" if step else "started", "step": step, "steps": len(steps)})
    per_epoch = len(steps) // settings.epochs
    stopping = False
    while step < len(steps) and not stopping:
        with hold():
            while True:
                began = time.monotonic()
                rate = learning_rate(step, len(steps), settings)
                for group in optimizer.param_groups:
                    group["lr"] = rate
                tokens = sum(examples[i].trained_tokens for i in steps[step])
                total = 0.0
                for i in steps[step]:
                    loss = row_loss(model, examples[i])
                    (loss / max(tokens, 1)).backward()
                    total += float(loss.detach())
                torch.nn.utils.clip_grad_norm_(trainable, settings.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                run.log({"event": "step", "step": step, "epoch": (step - 1) // per_epoch + 1,
                         "loss": round(total / max(tokens, 1), 5), "rows": len(steps[step - 1]), "tokens": tokens,
                         "lr": rate, "seconds": round(time.monotonic() - began, 2)})  # fmt: skip
                stopping = stop(step)
                if step == len(steps) or step % settings.checkpoint_every == 0 or stopping:
                    break
            save_checkpoint(run, model, optimizer, step, steps, base)
            run.log({"event": "checkpoint", "step": step})
    if step < len(steps):
        run.log({"event": "stopped", "step": step})
        return step
    save_adapter(model, run.adapter, base)
    shutil.rmtree(run.checkpoint, ignore_errors=True)
    run.log({"event": "done", "step": step})
    return step
