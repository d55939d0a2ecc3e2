"""One-line calculations as users type them, at the default effort, through the real stack.

The gateway, a worker, the policy service on Qwen2.5-Coder-0.5B and the bubblewrap sandbox,
called with the official openai SDK and no ``reasoning_effort`` (the server's default, the
the routing table shipped for this model). Each calculation is asked twice: bare, and with a format instruction. The
reply's ``content`` must be the right value in the asked form ("42", "Answer: 6912", a short
sentence when no form was asked), free of code; the evidence (the program, what it printed,
the vote) must be in ``reasoning_content``.

``CASES`` run in ``make test``; ``HELD_OUT`` are 10 more of the same kind that no rule or
prompt here was tuned on; ``make test`` deselects them by name (the Makefile says why) and they
run by hand, ``pytest tests/e2e/test_answer_form.py::test_held_out_calculations`` (they write
their raw replies to ``docs/data/answer_form_heldout.json``; docs/strategies.md reports them).

An open prompt at the same default effort is the other side: its reply is one sample's text as
it is, so that text streams as ``content`` deltas while it is decoded (docs/streaming.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from typing import Any

import pytest

from services.common.answers import answers_equivalent, extract_answer
from tests.e2e.gateway_stack import GatewayStack
from tests.e2e.qwen_stack import QWEN
from tests.helpers.processes import ROOT

pytestmark = pytest.mark.e2e

# (calculation, its value, a format instruction, the reply that instruction asks for)
CASES = [
    ("what's 6 times 7", "42", " Reply with the number.", "42"),
    ("How much is 15% of 240?", "36", " Only reply with the final value.", "36"),
    ("quick one: 1234 + 5678", "6912", " End with 'Answer: …'", "Answer: 6912"),
    ("What do you get if you divide 144 by 12?", "12", " Just the number please.", "12"),
    ("2 to the power of 10?", "1024", " Give me only the number, no explanation.", "1024"),
    ("How many minutes are in 7 hours?", "420", " Answer with a single integer.", "420"),
    ("Subtract 389 from 1000.", "611", ' Finish your reply with "Final answer: X".', "Final answer: 611"),
    ("what is 17 squared", "289", " Respond with just the number and nothing else.", "289"),
    ("Can you work out 25 * 4 * 3 for me?", "300", " Put the answer in \\boxed{}.", "\\boxed{300}"),
    ("If I split a $90 bill between 4 people, how much does each pay?", "22.5", " Reply with the number only.", "22.5"),
]
HELD_OUT = [
    ("Tell me what 9 times 8 is.", "72", " Only output the number.", "72"),
    ("What is 3/4 of 200?", "150", " Answer only.", "150"),
    ("Find 81 divided by 9.", "9", " Reply with 'Result: <n>'.", "Result: 9"),
    ("How many hours are in a week?", "168", " Give just the number.", "168"),
    ("1000 minus 1?", "999", " Number only, please.", "999"),
    ("what's the sum of 45, 55 and 100", "200", " End your answer with 'Answer: X'.", "Answer: 200"),
    ("Calculate 12.5 * 8.", "100", " Respond with only the final value.", "100"),
    ("How many seconds are there in 15 minutes?", "900", " no explanation, just the number", "900"),
    ("Double 368.", "736", " Reply with the digits only.", "736"),
    ("What's 7 cubed?", "343", " Format your reply as ANSWER=<n>.", "ANSWER=343"),
]


def ask(stack: GatewayStack, cases: list[tuple[str, str, str, str]]) -> list[dict[str, Any]]:
    """Every case bare and with its instruction, at the default effort: what came back and
    whether it is right, in the asked form, free of code, with its evidence as reasoning."""
    from openai import OpenAI

    client = OpenAI(base_url=f"{stack.url}/v1", api_key="unused", max_retries=0, timeout=300)
    rows = []
    for calculation, value, instruction, wanted in cases:
        for prompt, form in ((calculation, f"The answer is {value}."), (calculation + instruction, wanted)):
            started = time.perf_counter()
            reply = client.chat.completions.create(model=QWEN, messages=[{"role": "user", "content": prompt}])
            message = reply.choices[0].message
            content = (message.content or "").strip()
            reasoning = (message.model_extra or {}).get("reasoning_content") or ""
            ttc: dict[str, Any] = reply.model_extra["ttc"]  # type: ignore[index]
            stated = extract_answer(content) or ""
            rows.append(
                {
                    "prompt": prompt,
                    "expected": value,
                    "expected_content": form,
                    "content": content,
                    "reasoning_content": reasoning,
                    "correct": answers_equivalent(stated, value),
                    "in_form": content == form,
                    "code_free": "```" not in content and "print(" not in content,
                    "strategy": ttc["strategy"],
                    "task_type": ttc["task_type"],
                    "effort_applied": ttc["effort_applied"],
                    "completion_tokens": reply.usage.completion_tokens if reply.usage else 0,
                    "reasoning_tokens": (
                        reply.usage.completion_tokens_details.reasoning_tokens
                        if reply.usage and reply.usage.completion_tokens_details
                        else 0
                    ),
                    "seconds": round(time.perf_counter() - started, 2),
                }
            )
    return rows


def check(rows: list[dict[str, Any]]) -> None:
    wrong = [(r["prompt"], r["content"]) for r in rows if not (r["correct"] and r["in_form"])]
    assert len(rows) - len(wrong) >= len(rows) - 1, wrong  # at least 19 of 20 right and in the asked form
    assert all(r["code_free"] for r in rows), [r["content"] for r in rows if not r["code_free"]]
    assert all(r["reasoning_content"] for r in rows)  # the evidence, for every reply
    assert all(r["reasoning_tokens"] > 0 for r in rows)
    programs = [r for r in rows if r["strategy"] == "program_of_thought"]
    assert len(programs) == len(rows)  # every calculation routes to a program at the default effort
    assert sum("```python" in r["reasoning_content"] for r in programs) >= len(rows) - 1


def test_one_line_calculations_answer_in_the_form_asked(qwen_stack: GatewayStack) -> None:
    check(ask(qwen_stack, CASES))


def test_an_open_prompt_of_one_sample_streams_its_answer_token_by_token(qwen_stack: GatewayStack) -> None:
    """The shipped table routes this open prompt at the default effort to one sample (a vote of
    one): its content comes in many deltas as the engine decodes it, not in one after the search."""
    from openai import OpenAI

    client = OpenAI(base_url=f"{qwen_stack.url}/v1", api_key="unused", max_retries=0, timeout=300)
    stream = client.chat.completions.create(
        model=QWEN,
        messages=[{"role": "user", "content": "Explain in one sentence what a hash table is."}],
        max_tokens=64,
        stream=True,
        stream_options={"include_usage": True},
    )
    contents: list[str] = []
    report: dict[str, Any] = {}
    for chunk in stream:
        report = (chunk.model_extra or {}).get("ttc") or report
        contents += [choice.delta.content for choice in chunk.choices if choice.delta.content]
    assert report["task_type"] == "open" and report["candidates_generated"] == 1, report
    assert len(contents[:-1]) >= 5, f"{len(contents)} content deltas: {contents}"
    assert "hash" in "".join(contents).lower(), contents


def test_held_out_calculations(qwen_stack: GatewayStack) -> None:
    rows = ask(qwen_stack, HELD_OUT)
    described = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=ROOT)
    load = os.getloadavg()
    summary = {
        "right_and_in_form": sum(r["correct"] and r["in_form"] for r in rows),
        "right": sum(r["correct"] for r in rows),
        "code_free": sum(r["code_free"] for r in rows),
        "with_reasoning": sum(bool(r["reasoning_content"]) for r in rows),
        "calls": len(rows),
    }
    out = {"git": described.stdout.strip(), "model": QWEN, "load_average": load, "summary": summary, "rows": rows}
    (ROOT / "docs/data/answer_form_heldout.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    check(rows)
