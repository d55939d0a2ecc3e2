"""The instruction-set scan of the installed llama.cpp library (scripts/check_engine_isa.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("check_engine_isa", ROOT / "scripts" / "check_engine_isa.py")
assert _spec is not None and _spec.loader is not None
check_engine_isa = importlib.util.module_from_spec(_spec)
sys.modules["check_engine_isa"] = check_engine_isa
_spec.loader.exec_module(check_engine_isa)

# Lines as `objdump -d --no-show-raw-insn` prints them.
BASELINE = [
    "   1a2b0:\tvfmadd231ps %ymm2,%ymm1,%ymm0",
    "   1a2b5:\tvpmaddubsw %ymm3,%ymm4,%ymm5",
    "   1a2ba:\tvcvtph2ps %xmm0,%ymm0",
    "   1a2bf:\tshlx  %rax,%rbx,%rcx",
]
AMX = ["   2c010:\ttilezero %tmm0", "   2c015:\ttileloadd (%rax,%rbx,1),%tmm1", "   2c01a:\tldtilecfg (%rsp)"]
AVX512 = ["   3d000:\tvmovups (%rdi),%zmm0", "   3d006:\tvaddps %ymm1,%ymm2,%ymm3{%k1}"]
AVX_VNNI = ["   4e000:\t{vex} vpdpbusd %ymm1,%ymm2,%ymm3"]


def test_a_baseline_build_is_clean() -> None:
    scan = check_engine_isa.scan_disassembly(BASELINE, "lib.so")
    assert scan.clean, scan.counts


def test_each_forbidden_family_is_counted_with_an_example() -> None:
    scan = check_engine_isa.scan_disassembly(BASELINE + AMX + AVX512 + AVX_VNNI, "lib.so")
    assert not scan.clean
    assert scan.counts == {"AMX": 3, "AVX-512": 2, "AVX-VNNI": 1}
    assert scan.examples["AMX"].endswith("tilezero %tmm0")


def test_the_cli_fails_on_a_library_outside_the_baseline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "libggml-cpu.so").write_bytes(b"")
    monkeypatch.setattr(check_engine_isa.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(check_engine_isa, "scan_library", lambda p: check_engine_isa.scan_disassembly(AMX, str(p)))
    assert check_engine_isa.main(["--lib-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "AMX x3" in err and "rebuild llama-cpp-python portably" in err
    monkeypatch.setattr(check_engine_isa, "scan_library", lambda p: check_engine_isa.scan_disassembly(BASELINE, str(p)))
    assert check_engine_isa.main(["--lib-dir", str(tmp_path)]) == 0


def test_objdump_finds_amx_and_avx512_in_a_real_library(tmp_path: Path) -> None:
    """A shared object compiled here with AMX and AVX-512 instructions fails the real scan
    (gcc and objdump, as the install has them); one without them passes."""
    bad_src = tmp_path / "bad.c"
    bad_src.write_text(
        'void amx(void) { __asm__ volatile("tilerelease"); }\n'
        'void avx512(void) { __asm__ volatile("vpxord %zmm1, %zmm1, %zmm1"); }\n'
    )
    good_src = tmp_path / "good.c"
    good_src.write_text('void avx2(void) { __asm__ volatile("vpxor %ymm1, %ymm1, %ymm1"); }\n')
    bad_dir, good_dir = tmp_path / "bad", tmp_path / "good"
    for src, folder in ((bad_src, bad_dir), (good_src, good_dir)):
        folder.mkdir()
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(folder / "libggml-cpu.so"), str(src)], check=True)
    scan = check_engine_isa.scan_library(bad_dir / "libggml-cpu.so")
    assert scan.counts["AMX"] == 1 and scan.counts["AVX-512"] == 1
    assert check_engine_isa.scan_library(good_dir / "libggml-cpu.so").clean
