"""Entry point of ``python -m calibration``."""

from __future__ import annotations

import sys

from calibration.cli import main

sys.exit(main())
