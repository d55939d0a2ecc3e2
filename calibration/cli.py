"""``python -m calibration <verb>``: the one command line of the calibration pipeline.

The verbs stand side by side, one module each under :mod:`calibration.verbs`, in the order the
data flows: the problem set, pools drawn through the real services, judged, and their code run
on model-written inputs, their status and rescoring, the pricing table, the fitted routing table
(``calibrate``), its ladder on the development split, the live runs that check the simulator and measure what
pools cannot price, the routed run through the gateway, the escalation report, the confidence
model's fit and replays, the pools exported as training data, their chains of thought labelled
step by step (``process``), and the model fine-tuned on them (``train``). A verb module has
``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``; no verb imports another
(what two share lives in :mod:`calibration.lib` or :mod:`evaluation`).
"""

from __future__ import annotations

import argparse
import signal
import sys
from types import ModuleType

from calibration.verbs import (
    behaviour,
    calibrate,
    confidence,
    development,
    draw,
    escalation,
    export,
    judge,
    learned_router,
    live,
    lofo,
    modality,
    problems,
    process,
    rescore,
    routed,
    sealed,
    served_replay,
    status,
    table,
    train,
    validate,
)

VERBS: tuple[ModuleType, ...] = (
    problems,
    draw,
    judge,
    behaviour,
    status,
    rescore,
    table,
    calibrate,
    development,
    lofo,
    validate,
    live,
    routed,
    sealed,
    escalation,
    confidence,
    served_replay,
    learned_router,
    modality,
    export,
    process,
    train,
)


def parser() -> argparse.ArgumentParser:
    """The command line: one sub-command per verb, each with its module's flags."""
    top = argparse.ArgumentParser(prog="python -m calibration", description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="verb", required=True, metavar="verb")
    for verb in VERBS:
        p = sub.add_parser(verb.NAME, help=verb.HELP, description=verb.__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
        verb.add_arguments(p)
        p.set_defaults(run=verb.run)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    # A SIGTERM (kill, timeout) unwinds through ``finally``, so the services and stacks a verb
    # started stop too and a records chunk in flight is written with what it finished.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    return int(args.run(args))
