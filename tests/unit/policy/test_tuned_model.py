"""The tuned model is a model of its own: its registry name resolves to the GGUF the merge
writes (and says how to build it when missing), and with TTC_STACK_TUNED_MODEL the stack serves
it as its own policy deployment beside the default model, wired to the gateway and the workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.settings import StackSettings
from services.policy.models import TUNED, ModelError, gguf_path, model_id, tuned_gguf
from services.stack import policy_deployment

NAME = "qwen2.5-coder-0.5b-rft"


def test_the_tuned_name_resolves_to_the_merged_gguf(tmp_path: Path) -> None:
    assert TUNED[NAME].base == "qwen2.5-coder-0.5b" and model_id(NAME) == NAME
    with pytest.raises(ModelError, match=f"python -m calibration train merge {NAME}"):
        gguf_path(NAME, tmp_path)
    built = tuned_gguf(NAME, tmp_path)
    assert built == tmp_path / "tuned" / f"{NAME}.gguf"
    built.parent.mkdir()
    built.write_bytes(b"GGUF")
    assert gguf_path(NAME, tmp_path) == built


def test_one_setting_serves_it_beside_the_default_model() -> None:
    stack = StackSettings(tuned_model=NAME)
    env = {"TTC_GATEWAY_POLICY_TARGETS": "other=10.0.0.5:50051", "PATH": "/bin"}
    child, wired = policy_deployment(stack.tuned_model, stack.tuned_model_port, stack.tuned_model_metrics_port, env)
    assert child == {"TTC_POLICY_MODEL": NAME, "TTC_POLICY_PORT": "50062", "TTC_POLICY_METRICS_PORT": "9112"}
    assert wired["TTC_GATEWAY_POLICY_TARGETS"] == f"other=10.0.0.5:50051,{NAME}=127.0.0.1:50062"
    assert wired["TTC_ORCHESTRATOR_POLICY_TARGETS"] == wired["TTC_VERIFIER_POLICY_TARGETS"] == f"{NAME}=127.0.0.1:50062"
    assert "TTC_ORCHESTRATOR_ESCALATION_MODEL" not in wired  # a model of its own, not the cascade's target
    assert StackSettings().tuned_model == ""  # off unless asked for
