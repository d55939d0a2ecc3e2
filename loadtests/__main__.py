"""Entry point of ``python -m loadtests``."""

from __future__ import annotations

import sys

from loadtests.cli import main

sys.exit(main())
