"""``validate``: the pool simulator against live runs through the gateway.

For each problem that has a pool (up to ``--limit``) and each configuration (default
``pot@1,sc@4,pot@4``), one request goes through the gateway pinned to the request that runs the
configuration, with the pools' temperature and token caps; the answer is checked as the pools
check theirs (code by its hidden tests in the runner's grading sandbox); an infrastructure error
is recorded as such and excluded from the report, never counted wrong
(:class:`calibration.lib.validation.Validation`). Records are appended in chunks under
``docs/data/calibration/validation/<model>/``, each written whole, so a run stopped at any point
resumes with the pairs no record holds. Without ``--base-url`` it starts ``ttc stack`` on the
pools' model on free ports and takes the shared model lock (``/tmp/ttc-model.lock``) per chunk.
The report (printed, and ``report.json`` beside the records) compares live and priced figures on
the same problems (:mod:`evaluation.heldout.simulator_check`).
"""

from __future__ import annotations

import argparse

from calibration.lib.paths import DEFAULT_VALIDATION
from calibration.lib.validation import Validation, run_validation
from calibration.lib.validation import add_arguments as validation_arguments

NAME = "validate"
HELP = "run priced configurations live through the gateway; compare (resumes)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    validation_arguments(p)


def run(a: argparse.Namespace) -> int:
    return run_validation(a, Validation, DEFAULT_VALIDATION)
