"""``status``: what is drawn in a pool folder: chunks, problems per split and family, cut and
correct shares per kind, and the chunks or problems a draw would redraw (another program
version, other draw settings, a changed program prompt)."""

from __future__ import annotations

import argparse
import collections

from calibration.lib.arguments import add_pool_folder_arguments, pool_folder
from calibration.lib.drawer import DrawSettings, program_prompt_changed, program_version
from evaluation.pools.store import DRAW_KINDS, iter_chunks, read_pools

NAME = "status"
HELP = "count what is drawn (cut share per kind, stale chunks)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_pool_folder_arguments(p)


def run(a: argparse.Namespace) -> int:
    directory = pool_folder(a)
    chunks = list(iter_chunks(directory))
    version, settings = program_version(), DrawSettings(k=a.k, seed=a.seed).as_dict()
    pools = read_pools(directory)
    print(f"{directory}: {len(chunks)} chunks, {len(pools)} problems; program version now {version}")
    stale = [c.path.name for c in chunks if c.header.get("program_version") != version]
    print(f"chunks of another program version: {len(stale)} {stale[:5]}")
    other = [c.path.name for c in chunks if c.header.get("settings") != settings]
    print(f"chunks with other draw settings than k={a.k} defaults: {len(other)}")
    changed = [p.id for p in pools if program_prompt_changed(p)]
    print(f"problems whose program prompt changed since drawn (a draw redraws them): {len(changed)} {changed[:5]}")
    for split in sorted({p.split for p in pools}):
        mine = [p for p in pools if p.split == split]
        fams = collections.Counter(p.family for p in mine)
        print(f"{split}: {len(mine)} problems: " + ", ".join(f"{f} {n}" for f, n in sorted(fams.items())))
        for kind in DRAW_KINDS:
            cands = [c for p in mine if kind in p.draws for c in p.draws[kind].candidates]
            if cands:
                cut = sum(c.cut for c in cands)
                right = sum(bool(c.correct) for c in cands)
                print(f"  {kind:<8} {len(cands)} candidates, cut {cut} ({cut / len(cands):.1%}), "
                      f"correct {right / len(cands):.1%}")  # fmt: skip
    return 0
