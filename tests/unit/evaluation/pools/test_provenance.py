"""The provenance every raw result file carries (evaluation/pools/provenance.py)."""

from __future__ import annotations

import json
from pathlib import Path

from evaluation.pools.provenance import file_sha256, model_sha256, provenance, write_raw
from services.policy.models import REGISTRY


def test_a_raw_file_carries_revision_load_and_the_pinned_model_hash(tmp_path: Path) -> None:
    started = provenance("smollm2-135m")
    path = write_raw("bench", {"tok_s": [1.5, 2.5]}, started=started, out_dir=tmp_path, argv=["x"])
    data = json.loads(path.read_text())
    meta = data["provenance"]
    assert path.parent == tmp_path and path.name.startswith("bench-") and path.suffix == ".json"
    assert data["results"] == {"tok_s": [1.5, 2.5]}
    assert meta["model_sha256"] == REGISTRY["smollm2-135m"].sha256
    assert meta["git_describe"] not in ("", "unknown")
    assert len(meta["load_average_start"]) == 3 and len(meta["load_average_end"]) == 3
    assert meta["argv"] == ["x"]


def test_a_model_file_is_hashed_and_an_unknown_name_has_no_hash(tmp_path: Path) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(range(256)))
    assert model_sha256(str(gguf)) == file_sha256(gguf) != model_sha256("smollm2-135m")
    assert model_sha256("some-remote-model") is None
    assert model_sha256(None) is None
