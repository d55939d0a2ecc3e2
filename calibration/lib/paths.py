"""Where calibration keeps its data, and how a report names a path.

Everything a verb reads or writes by default lives under ``docs/data/calibration/`` (committed,
so every figure in the docs can be recomputed): pools per model, live records of the tree
strategies, the simulator check's records, the routed runs, and the fitted tables' predictions.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "data" / "calibration"
DEFAULT_POOLS = DATA / "pools"
DEFAULT_LIVE = DATA / "live"
DEFAULT_VALIDATION = DATA / "validation"
DEFAULT_ROUTED = DATA / "routed"
DEFAULT_MODEL = "qwen2.5-coder-0.5b"
# The shipped model's pools as a report names them (relative to the checkout, the working directory).
SHIPPED_POOLS = Path("docs/data/calibration/pools") / DEFAULT_MODEL


def relative_to_root(path: Path) -> str:
    """``path`` relative to the checkout (what a committed report names), else as given."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def safe_name(model: str) -> str:
    """The model name as a file name: ``meta-llama/Llama-3.1-70B`` -> ``meta-llama_Llama-3.1-70B``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("._") or "model"
