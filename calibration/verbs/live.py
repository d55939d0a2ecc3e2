"""``live``: sequential and tree strategies measured live through the gateway on a stated subset
of calibration problems.

A pool cannot price beam search, DVTS, MCTS, AB-MCTS, revision or budget forcing, so each live
configuration (:data:`evaluation.pricing.live_configs.LIVE_CONFIGS`) is sent once per problem of
the subset: the first ``--limit`` calibration pools taken round-robin over families
(:func:`evaluation.pricing.live_configs.stratified`; every family is represented), whose ids and
order every chunk header records. The run loop, records, resume, model lock and own ``ttc
stack`` are the validation's (:class:`calibration.lib.validation.Validation`); only the
configurations and the subset differ. Records go under ``docs/data/calibration/live/<model>/``.

The report (printed, and ``report.json`` beside the records) is the pricing table on the live
subset: every live configuration beside every priced configuration on the same problems
(:func:`evaluation.pricing.live_configs.live_table`). ``calibrate`` and ``development`` read the same
records into the route fit (:func:`calibration.lib.fit.live_set`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from calibration.lib.paths import DEFAULT_LIVE, relative_to_root
from calibration.lib.records import REPORT, LiveRunError, read_records
from calibration.lib.validation import Validation, run_validation
from calibration.lib.validation import add_arguments as validation_arguments
from evaluation.pools.provenance import git_describe
from evaluation.pools.store import ProblemPool
from evaluation.pricing.live_configs import LIVE_CONFIGS, UnknownLive, live_estimates, live_pin, live_table, stratified
from evaluation.pricing.live_records import GatewayPin, LiveRecord
from evaluation.pricing.pricer import Config, Pricer
from evaluation.pricing.table import Row, default_configs, fit_latency, judges_in, price_all
from services.search.strategies.stopping import should_stop

NAME = "live"
HELP = "run sequential and tree strategies live on a stratified calibration subset"
DEFAULT_LIMIT = 40
SUBSET = "the first limit calibration pools, round-robin over families (in order of first appearance), draw order"


@dataclass
class LiveRun(Validation):
    """The validation's loop with live configurations on the stratified subset."""

    def prepare(self) -> tuple[list[ProblemPool], Mapping[str, tuple[Config | None, GatewayPin]], dict[str, Any], str]:
        pools, settings, sha = self.pools()
        try:
            configs: dict[str, tuple[Config | None, GatewayPin]] = {
                name: (None, live_pin(name, settings)) for name in self.configs
            }
        except UnknownLive as err:
            raise LiveRunError(str(err)) from err
        if not configs:
            raise LiveRunError("no live configurations to run")
        return stratified(pools, self.limit), configs, settings, sha

    def settings_header(
        self, settings: dict[str, Any], configs: Mapping[str, tuple[Config | None, GatewayPin]]
    ) -> dict[str, Any]:
        subset = stratified(self.pools()[0], self.limit)
        ids = [p.id for p in subset]
        return super().settings_header(settings, configs) | {
            "subset": {"order": SUBSET, "limit": self.limit, "ids": ids}
        }

    def write_report(self, seed: int = 0, limit: int = 128) -> dict[str, Any]:
        """The pricing table on the live subset; ``report.json`` beside the records."""
        pools, _, sha = self.pools()
        records, headers, _ = read_records(self.out)
        live = live_estimates([LiveRecord.from_dict(r) for r in records], list(LIVE_CONFIGS))
        measured = {pid for per in live.values() for pid in per}
        subset = [p for p in pools if p.id in measured]
        k = min(len(d.sampled) for p in pools for d in p.draws.values())

        def stop(votes: Any, remaining: float) -> bool:
            return should_stop(votes, remaining, self.confidence).stop

        pricer = Pricer(fit_latency(pools), stop, limit=limit, seed=seed)
        priced = price_all(pricer, subset, default_configs(k, judges_in(pools)))
        rows = live_table(subset, priced, live, seed)
        errors = sum(1 for r in records if r.get("error"))
        body = {
            "provenance": {
                "git_describe": git_describe(),
                "model": self.model,
                "model_sha256": sha,
                "pools": relative_to_root(self.pools_dir),
                "records": len(records),
                "infrastructure_errors": errors,
                "chunks": len(headers),
                "chunk_code": sorted({str(h.get("git_describe")) for h in headers}),
                "subset": SUBSET,
                "latency_model": asdict(pricer.latency),
            },
            "rows": [r.as_dict() for r in rows],
            "markdown": markdown(rows, set(live)),
        }
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / REPORT).write_text(json.dumps(body, indent=1) + "\n")
        return body


def markdown(rows: list[Row], live: set[str]) -> str:
    """The table, live configurations tagged."""
    head = (
        "| group | configuration | problems | accuracy | 95% CI | generated tok | prompt tok | latency s mean / p50 |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        tag = " (live)" if r.config in live else ""
        lines.append(f"| {r.group} | `{r.config}`{tag} | {r.problems} | {r.accuracy:.3f} | [{r.low:.3f}, {r.high:.3f}] "
                     f"| {r.generated:.0f} | {r.prompt:.0f} | {r.latency_s:.1f} / {r.latency_p50_s:.1f} |")  # fmt: skip
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    validation_arguments(p)
    p.set_defaults(configs=",".join(LIVE_CONFIGS), limit=DEFAULT_LIMIT)
    p.description = f"live configurations: {', '.join(LIVE_CONFIGS)}; subset: {SUBSET}"


def run(a: argparse.Namespace) -> int:
    return run_validation(a, LiveRun, DEFAULT_LIVE)
