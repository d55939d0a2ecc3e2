"""Seed mixing shared by every place that derives per-candidate seeds.

The policy service derives candidate seeds from a request's base seed, and the orchestrator
derives call seeds from a job seed; both use the same mixing function so that neighbouring
inputs give unrelated seeds and a recorded seed always replays the same way.
"""

from __future__ import annotations

UINT64 = (1 << 64) - 1


def splitmix64(x: int) -> int:
    """One step of SplitMix64: a fixed, well-mixed map from one 64-bit integer to another."""
    x = (x + 0x9E3779B97F4A7C15) & UINT64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & UINT64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & UINT64
    return x ^ (x >> 31)
