"""The pure parts of the OptiLLM side by side: configuration list, pinning, ledger, scoring."""

from __future__ import annotations

from typing import Any

import pytest

from loadtests.optillm.configs import APPROACHES, Config, UnknownConfig, build_configs
from loadtests.optillm.scoring import common_problems, latest, markdown, summarize, verdict
from loadtests.optillm.upstream import Ledger, pinned_body


def rec(config: str, pid: str, outcome: str, tokens: int = 100, latency: float = 1.0, kind: str = "arithmetic"
        ) -> dict[str, Any]:  # fmt: skip
    return {"config": config, "problem_id": pid, "kind": kind, "outcome": outcome,
            "generated_tokens": tokens, "prompt_tokens": 50, "latency_s": latency}  # fmt: skip


def test_configs_cover_every_effort_and_approach_in_order() -> None:
    configs = build_configs("all", "all")
    labels = [c.label for c in configs]
    assert labels[:6] == ["ttc:none", "ttc:minimal", "ttc:low", "ttc:medium", "ttc:high", "ttc:xhigh"]
    assert labels[6:] == [f"optillm:{a}" for a in APPROACHES]
    assert "optillm:executecode" in labels  # the code-execution approach, by its plugin slug


def test_configs_refuse_unknown_and_repeated_names() -> None:
    with pytest.raises(UnknownConfig, match="known: none, minimal"):
        build_configs("huge", "")
    with pytest.raises(UnknownConfig, match="OptiLLM approach 'rto2'"):
        build_configs("", "rto2")
    with pytest.raises(UnknownConfig, match="named twice: optillm:moa"):
        build_configs("", "moa,moa")
    with pytest.raises(UnknownConfig, match="no configuration"):
        build_configs("", "")
    with pytest.raises(UnknownConfig, match="expected ttc:<effort>"):
        Config.parse("vllm:x")


def test_pinned_body_is_one_plain_call_with_room_for_every_sample() -> None:
    body = {"model": "m", "messages": [], "n": 3, "max_tokens": 200, "temperature": 0.8, "reasoning_effort": "high"}
    pinned = pinned_body(body)
    assert pinned["reasoning_effort"] == "none"
    assert pinned["ttc"] == {"strategy": "single", "token_budget": 600, "stream_reasoning": False}
    assert pinned["temperature"] == 0.8 and pinned["n"] == 3  # OptiLLM's sampling is kept
    assert body["reasoning_effort"] == "high"  # the caller's body is not changed
    uncapped = pinned_body({"model": "m", "messages": []}, default_max_tokens=64)
    assert uncapped["max_tokens"] == 64 and uncapped["ttc"]["token_budget"] == 64


def test_ledger_sums_usage_and_keeps_rejections_with_their_fields() -> None:
    ledger = Ledger()
    ok = {"choices": [{}, {}], "usage": {"prompt_tokens": 10, "completion_tokens": 40}}
    ledger.add(200, {"model": "m", "messages": [], "n": 2}, ok, 0.5)
    bad = {"error": {"message": "logprobs is not supported", "param": "logprobs"}}
    ledger.add(400, {"model": "m", "messages": [], "logprobs": True}, bad, 0.1)
    assert (ledger.calls, ledger.rejected, ledger.samples) == (2, 1, 2)
    assert (ledger.prompt_tokens, ledger.completion_tokens) == (10, 40)
    assert ledger.rejections == [{"call": 2, "status": 400, "error": bad["error"], "fields": ["logprobs"]}]


def test_summary_keeps_errors_apart_from_wrong_answers_with_wilson_intervals() -> None:
    records = [rec("ttc:none", "p1", "correct", 100), rec("ttc:none", "p2", "wrong", 300),
               rec("ttc:none", "p3", "error", 30, kind="code")]  # fmt: skip
    rows = summarize(records, ["ttc:none", "ttc:high"])
    overall = rows[0]
    # the error is no answer, not a wrong one: accuracy is over the two graded requests
    assert (overall.group, overall.problems, overall.correct, overall.errors) == ("all", 2, 1, 1)
    assert overall.accuracy == pytest.approx(1 / 2)
    assert 0.0 < overall.ci_low < 1 / 2 < overall.ci_high < 1.0
    assert overall.mean_generated_tokens == pytest.approx(430 / 3)  # what the error spent counts
    assert [r.group for r in rows] == ["all", "arithmetic", "code"]  # no rows for a config with no records
    code = rows[2]
    assert (code.problems, code.errors, code.accuracy) == (0, 1, 0.0)
    assert "| ttc:none | all | 2 | 0.50 |" in markdown(rows)


def test_a_record_written_twice_counts_once_and_tables_compare_shared_problems() -> None:
    records = [rec("ttc:none", "p1", "wrong"), rec("ttc:none", "p1", "correct"), rec("optillm:moa", "p1", "wrong"),
               rec("ttc:none", "p2", "correct")]  # fmt: skip
    assert [r["outcome"] for r in latest(records) if r["config"] == "ttc:none" and r["problem_id"] == "p1"] == [
        "correct"
    ]
    shared = common_problems(records, ["ttc:none", "optillm:moa"])
    assert sorted((r["config"], r["problem_id"]) for r in shared) == [("optillm:moa", "p1"), ("ttc:none", "p1")]


def test_verdict_needs_accuracy_and_a_third_of_the_tokens() -> None:
    records = [rec("ttc:high", "p1", "correct", 100), rec("ttc:high", "p2", "correct", 100),
               rec("optillm:moa", "p1", "correct", 900), rec("optillm:moa", "p2", "wrong", 900),
               rec("optillm:bon", "p1", "correct", 200), rec("optillm:bon", "p2", "wrong", 200)]  # fmt: skip
    v = verdict(summarize(records, ["ttc:high", "optillm:moa", "optillm:bon"]))
    assert v["best_approach"] == "optillm:bon"  # as accurate as moa, fewer tokens
    assert v["accuracy_at_least_best"] and not v["tokens_at_most_a_third"] and not v["met"]
    assert v["token_ratio"] == pytest.approx(0.5)
    assert not verdict(summarize(records, ["ttc:high"]))["decided"]


def test_the_sealed_split_is_sent_as_its_question_alone_and_graded_by_reasoning_gym() -> None:
    import asyncio

    from loadtests.optillm_compare import judge, messages_of, record_fields, select_sealed

    problems = select_sealed(20)
    assert len({p.family for p in problems[:10]}) == 10  # round-robin: any prefix covers the families
    first = problems[0]
    assert messages_of(first) == [{"role": "user", "content": first.question}]
    assert record_fields(first) == {"family": first.family, "kind": first.family, "level": 0}
    assert asyncio.run(judge(first, f"The answer is {first.reference}.", None))[0] == "correct"
    assert asyncio.run(judge(first, "I cannot tell.", None))[0] == "wrong"
