"""Fail if the installed llama.cpp libraries hold instructions outside the portable baseline.

A native llama.cpp build carries the build host's instruction sets; on a host without them the
policy dies with SIGILL on its first decode. The Makefile and the image build both
compile for x86-64-v3 (AVX2, FMA, F16C, BMI2); this disassembles every shared library the
`llama_cpp` package ships and refuses AMX tile instructions, AVX-512 (any zmm register or
opmask) and AVX-VNNI. On other architectures there is nothing to check.

Usage: python scripts/check_engine_isa.py [--lib-dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

# Each family outside the baseline, with a pattern over one line of `objdump -d` output.
FORBIDDEN: dict[str, re.Pattern[str]] = {
    "AMX": re.compile(r"\t(tilezero|tileloadd|tileloaddt1|tilestored|ldtilecfg|sttilecfg|tilerelease|tdp\w+)\b"),
    "AVX-512": re.compile(r"%zmm\d+|\{%k[1-7]\}"),
    "AVX-VNNI": re.compile(r"\{vex\} vpdp(bu|ws)s?d"),
}


@dataclass
class LibraryScan:
    """What one library holds of each forbidden family (counts, and the first line seen)."""

    path: str
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, str] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return not any(self.counts.values())


def llama_cpp_lib_dir() -> Path:
    """The folder of the installed `llama_cpp` package's shared libraries, found without importing it."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("check_engine_isa: llama_cpp is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "lib"


def scan_disassembly(lines: Iterable[str], path: str) -> LibraryScan:
    """Count forbidden instructions in disassembly lines (pure, unit-tested)."""
    scan = LibraryScan(path=path, counts=dict.fromkeys(FORBIDDEN, 0))
    for line in lines:
        for family, pattern in FORBIDDEN.items():
            if pattern.search(line):
                scan.counts[family] += 1
                scan.examples.setdefault(family, line.strip())
    return scan


def scan_library(path: Path) -> LibraryScan:
    objdump = shutil.which("objdump")
    if objdump is None:
        raise SystemExit("check_engine_isa: objdump not found (Debian package binutils)")
    proc = subprocess.Popen([objdump, "-d", "--no-show-raw-insn", str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    scan = scan_disassembly(proc.stdout, str(path))
    if proc.wait() != 0:
        raise SystemExit(f"check_engine_isa: objdump failed on {path}")
    return scan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib-dir", type=Path, help="folder of shared libraries (default: the installed llama_cpp)")
    parser.add_argument("--json", action="store_true", help="print the scan as JSON")
    args = parser.parse_args(argv)
    if platform.machine() not in ("x86_64", "AMD64"):
        print(f"check_engine_isa: {platform.machine()}: no x86-64 baseline to check")
        return 0
    lib_dir = args.lib_dir or llama_cpp_lib_dir()
    libraries = sorted(p for p in lib_dir.glob("*.so*") if p.is_file())
    if not libraries:
        raise SystemExit(f"check_engine_isa: no shared libraries under {lib_dir}")
    scans = [scan_library(p) for p in libraries]
    if args.json:
        print(json.dumps([scan.__dict__ for scan in scans], indent=2))
    bad = [scan for scan in scans if not scan.clean]
    for scan in bad:
        found = ", ".join(f"{family} x{n} (e.g. {scan.examples[family]!r})" for family, n in scan.counts.items() if n)
        print(f"check_engine_isa: {scan.path} holds instructions outside x86-64-v3: {found}", file=sys.stderr)
    if bad:
        print(
            "check_engine_isa: rebuild llama-cpp-python portably: rm .venv/.engine-portable && make install "
            "(CMAKE_ARGS='-DGGML_NATIVE=OFF ...', docs/policy-engines.md)",
            file=sys.stderr,
        )
        return 1
    print(f"check_engine_isa: {len(scans)} libraries under {lib_dir}: x86-64-v3 only (no AMX, AVX-512, AVX-VNNI)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
