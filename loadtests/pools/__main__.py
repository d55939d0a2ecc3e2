"""Entry point of ``python -m loadtests.pools``."""

from __future__ import annotations

import sys

from loadtests.pools.cli import main

sys.exit(main())
