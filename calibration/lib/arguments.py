"""The command-line flags several verbs share, spelled once: which problem set (``draw``,
``problems``) and which pool folder (``status``, ``rescore``, ``table``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from calibration.lib.paths import DEFAULT_MODEL, DEFAULT_POOLS
from evaluation.problems.problemset import DEFAULT_PER_FAMILY


def add_problem_set_arguments(p: argparse.ArgumentParser) -> None:
    """``--per-family``, ``--seed`` (the data seed) and ``--families``: the problem set built."""
    p.add_argument("--per-family", type=int, default=DEFAULT_PER_FAMILY, help="problems per family and split")
    p.add_argument("--seed", type=int, default=0, help="data seed")
    p.add_argument("--families", default="", help="comma-separated subset (default: all)")


def add_pool_folder_arguments(p: argparse.ArgumentParser) -> None:
    """``--model`` and ``--out`` name the pool folder (:func:`pool_folder`); ``--seed`` and ``--k``
    the draw settings read against it."""
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--out", type=Path, default=None, help="pool folder (default docs/data/calibration/pools/<model>)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--k", type=int, default=8)


def pool_folder(a: argparse.Namespace) -> Path:
    """The pool folder ``--out`` names, else the model's under ``docs/data/calibration/pools``."""
    return Path(a.out or DEFAULT_POOLS / a.model)
