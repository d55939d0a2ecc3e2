"""Whether the code a stack serves changed since a revision: the files under ``services/`` and
``proto/`` that differ between that revision and the working tree.

A run through the gateway that spans sessions (the sealed split) restarts its stack on every
resume, from the working tree; if the served code changed in between, the resumed chunks would
measure another system than the first ones, so such a run must be started again under a new name.
Evaluation, calibration and documentation changes do not touch what is served and are allowed; so
are the routing tables under ``services/gateway/routing/``, since a run checks the sha256 of the
one table its gateway serves on its own (another table refitted meanwhile is not served by it).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from calibration.lib.paths import ROOT

SERVED_PATHS = ("services", "proto")
#: routing tables: data, each checked by its own sha256 where a run serves it
TABLES = ":(exclude)services/gateway/routing/*.json"


def served_changes(revision: str, cwd: Path = ROOT) -> list[str] | None:
    """The served files (routing tables aside) that differ between ``revision`` (a ``git
    describe``; a ``-dirty`` suffix is dropped: the committed tree is what can be compared) and
    the working tree; ``None`` where git cannot tell (no checkout, an unknown revision)."""
    base = revision.removesuffix("-dirty")
    try:
        out = subprocess.run(["git", "diff", "--name-only", base, "--", *SERVED_PATHS, TABLES], cwd=cwd,
                             capture_output=True, text=True, check=False)  # fmt: skip
    except OSError:
        return None
    if out.returncode != 0:
        return None
    return [line for line in out.stdout.splitlines() if line.strip()]
