"""Generate the Python gRPC stubs from proto/ into services/gen/.

grpcio-tools writes imports relative to the proto root (``from ttc.v1 import ...``); the
project's import root is ``services``, so the imports are rewritten to
``services.gen.ttc.v1``. ``--check`` regenerates into a temporary folder and fails when the
committed stubs differ, which is how CI catches stale generated code.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import sys
import tempfile
from pathlib import Path

import grpc_tools
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
TARGET = ROOT / "services" / "gen"
PACKAGE_PREFIX = "services.gen."


def generate(out_dir: Path) -> None:
    """Run protoc for every proto under proto/ and fix the generated imports."""
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto"))
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for path in out_dir.rglob("*.py*"):
        text = path.read_text()
        text = text.replace("from ttc.v1 import", f"from {PACKAGE_PREFIX}ttc.v1 import")
        path.write_text(text)
    for folder in [out_dir, *[p for p in out_dir.rglob("*") if p.is_dir()]]:
        (folder / "__init__.py").touch()


def differences(a: Path, b: Path) -> list[str]:
    """Relative paths that differ between two generated trees."""
    names_a = {str(p.relative_to(a)) for p in a.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    names_b = {str(p.relative_to(b)) for p in b.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    changed = sorted(names_a ^ names_b)
    for name in sorted(names_a & names_b):
        if not filecmp.cmp(a / name, b / name, shallow=False):
            changed.append(name)
    return changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if services/gen is stale")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        generate(out)
        if args.check:
            stale = differences(out, TARGET)
            if stale:
                print("generated stubs are stale; run `make proto`:", *stale, sep="\n  ")
                return 1
            print("generated stubs are up to date")
            return 0
        shutil.rmtree(TARGET, ignore_errors=True)
        shutil.copytree(out, TARGET)
        TARGET.chmod(0o755)  # copytree keeps the temporary folder's 0700: services run as other users
    print(f"generated stubs in {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
