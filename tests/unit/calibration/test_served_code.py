"""What a resumed gateway run compares: the served files between a revision and the working tree."""

from __future__ import annotations

import subprocess
from pathlib import Path

from calibration.lib.served_code import served_changes


def _git(repo: Path, *args: str) -> str:
    env_args = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    done = subprocess.run(["git", *env_args, *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_served_files_changed_since_a_revision_are_named_and_other_changes_are_not(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    table = "services/gateway/routing/routing.a+b.json"
    for path in ("services/gateway/app.py", "proto/ttc.proto", "evaluation/fit.py", "docs/ladder.md", table):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("one\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "first")
    first = _git(tmp_path, "rev-parse", "--short", "HEAD")
    (tmp_path / "evaluation/fit.py").write_text("two\n")
    (tmp_path / "docs/ladder.md").write_text("two\n")
    (tmp_path / table).write_text("two\n")  # a table: the run checks the sha256 of the one it serves
    assert served_changes(first, tmp_path) == []  # evaluation and docs are not served
    assert served_changes(f"{first}-dirty", tmp_path) == []
    (tmp_path / "services/gateway/app.py").write_text("two\n")  # uncommitted: the stack would serve it
    assert served_changes(first, tmp_path) == ["services/gateway/app.py"]
    _git(tmp_path, "commit", "-q", "-am", "second")
    (tmp_path / "proto/ttc.proto").write_text("two\n")
    assert served_changes(first, tmp_path) == ["proto/ttc.proto", "services/gateway/app.py"]
    assert served_changes("0" * 40, tmp_path) is None  # an unknown revision: git cannot tell
