"""Pure load with the runner's request mix: throughput and error rates, no accuracy.

    locust -f loadtests/locustfile.py --host http://127.0.0.1:8000 --headless -u 8 -r 2 -t 2m

The mix comes from environment variables (the same names and meaning as the runner's flags):
``LOADTEST_MODEL``, ``LOADTEST_DATASETS`` (comma-separated), ``LOADTEST_PROBLEMS`` (per set and
level), ``LOADTEST_EFFORTS``, ``LOADTEST_STRATEGIES`` (``auto`` and/or pinned specs),
``LOADTEST_MAX_TOKENS``. Every request is a (problem, effort, strategy) drawn uniformly from
the same problems and grid a ``python -m loadtests run`` would send; requests are named by
their grid cell so locust's table shows each cell's latency and failures apart. A response
without a ``ttc`` report or without choices counts as a failure.
"""

from __future__ import annotations

import os
import random
from typing import Any

from locust import HttpUser, between, events, task

from evaluation.problems.datasets import DEVELOPMENT_KEY, load_mix
from loadtests.client import EXTENSION_KEY, request_kwargs
from loadtests.grid import build_grid, split_list


def _mix() -> tuple[str, list[Any], list[Any], int]:
    model = os.environ.get("LOADTEST_MODEL", "qwen2.5-coder-0.5b")
    datasets = split_list(os.environ.get("LOADTEST_DATASETS", "chain_sum,basic_arithmetic,gsm_symbolic"))
    problems = load_mix(datasets, int(os.environ.get("LOADTEST_PROBLEMS", "4")), split=DEVELOPMENT_KEY)
    cells = build_grid(
        split_list(os.environ.get("LOADTEST_EFFORTS", "low,medium,high")),
        split_list(os.environ.get("LOADTEST_STRATEGIES", "auto")),
    )
    return model, problems, cells, int(os.environ.get("LOADTEST_MAX_TOKENS", "256"))


MODEL, PROBLEMS, CELLS, MAX_TOKENS = _mix()


@events.init.add_listener  # type: ignore[untyped-decorator]  # locust ships no annotations for it
def _announce(environment: Any, **_kwargs: Any) -> None:
    print(f"locust mix: {len(PROBLEMS)} problems x {len(CELLS)} cells, model {MODEL}")


class ChatUser(HttpUser):
    wait_time = between(0.0, 0.5)

    @task
    def chat(self) -> None:
        problem = random.choice(PROBLEMS)
        cell = random.choice(CELLS)
        body = request_kwargs(MODEL, problem.messages(), cell, temperature=0.7, max_tokens=MAX_TOKENS, seed=None)
        body.update(body.pop("extra_body", {}))
        name = f"{cell.effort}/{cell.label or 'auto'}"
        with self.client.post("/v1/chat/completions", json=body, name=name, catch_response=True) as response:
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code}: {response.text[:200]}")
                return
            data = response.json()
            if not data.get("choices") or EXTENSION_KEY not in data:
                response.failure("response without choices or ttc report")
            else:
                response.success()
