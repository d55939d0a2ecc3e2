"""Capture the packaged model's real program completions for the program-check unit tests.

The checks that make a literal-printing program abstain (``program_checks.py``) and the form
stripping of the program prompt (``answer_form.py``) are tested on what the model actually
writes, not on programs a person imagined. This script asks the real Qwen2.5-Coder-0.5B
(llama.cpp, its own chat template) for programs, greedy and sampled, under two prompts: the
question as the user wrote it, format instruction included (the earlier prompt, under which
the model copies "Answer: …" into ``print``), and the prompt ``program_messages`` builds now.
Each completion is stored with the program extracted and the labels a person checked by hand
(``computes``: whether the printed value is computed from the question).

    flock /tmp/ttc-model.lock .venv/bin/python scripts/capture_program_outputs.py tests/unit/data/program_outputs.json
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from llama_cpp import Llama

from services.policy.models import gguf_path
from services.search.interfaces import Message
from services.search.strategies.program import PROGRAM_INSTRUCTION, PROGRAM_SYSTEM, program_messages

QUESTIONS = (
    "What is 6 times 7? Reply with the number.",
    "What is 123 + 456? End with 'Answer: …'",
    "What's 15% of 240? Only reply with the final value.",
    "How many r's are in strawberry? Just the number please.",
    "What is 2 to the power of 10? Give me only the number, no explanation.",
    "How many seconds are in 3 hours? Reply with just the number.",
    'What is 1001 minus 999? Finish your reply with "Final answer: X".',
    "Multiply 13 by 17 and write your answer as 'Result = ?'",
    "What is 48 divided by 6? Answer with a single integer.",
    "Convert 5 km to meters. Respond with only the number.",
)
SAMPLES = 3  # sampled programs per prompt, beside the greedy one


def old_messages(question: str) -> list[dict[str, str]]:
    """The program prompt as it was before form instructions were stripped from it."""
    return [
        {"role": "system", "content": PROGRAM_SYSTEM},
        {"role": "user", "content": f"{question}\n\n{PROGRAM_INSTRUCTION}"},
    ]


def new_messages(question: str) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in program_messages((Message("user", question),))]


def main(out: str) -> None:
    model = Llama(str(gguf_path("qwen2.5-coder-0.5b", Path("models"))), n_ctx=2048, n_threads=2, verbose=False)
    records = []
    for question in QUESTIONS:
        for prompt, messages in (("old", old_messages(question)), ("new", new_messages(question))):
            for sample in range(SAMPLES + 1):
                temperature = 0.0 if sample == 0 else 0.7
                reply = model.create_chat_completion(
                    messages=messages,  # type: ignore[arg-type]
                    temperature=temperature,
                    seed=sample,
                    max_tokens=256,
                )
                text = reply["choices"][0]["message"]["content"]  # type: ignore[index]
                records.append(
                    {"question": question, "prompt": prompt, "temperature": temperature, "seed": sample, "text": text}
                )
                print(json.dumps(records[-1])[:200], flush=True)
    described = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout
    data = {"model": "qwen2.5-coder-0.5b-instruct-q4_k_m", "git": described.strip(), "records": records}
    Path(out).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
