"""The numpy MiniLM encoder: equal to the transformers model, padding-neutral, and torch-free.

The equivalence test is the only place here that loads torch; the gateway's own import path
must not (checked in a fresh interpreter, since this test process may already hold torch).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from services.common.embedding import DIM, Encoder, default_model_path

SENTENCES = [
    "What is 17 + 25?",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?",
    'def add(a: int, b: int) -> int:\n    """Return the sum of a and b."""\n',
    "Explain why the sky is blue, in two sentences.",
    "Find all integer solutions to the equation x^2-3y^2=17. " * 30,  # longer than the 256-token limit
]


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    return Encoder.packaged()


def _transformers_embeddings(texts: list[str]) -> np.ndarray:
    """The reference: the model run by transformers, mean-pooled and normalized (1_Pooling)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    path = str(default_model_path())
    tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = transformers.AutoModel.from_pretrained(path, local_files_only=True).eval()
    with torch.inference_mode():
        batch = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
        hidden = model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1).numpy()


def test_numpy_encoder_equals_transformers(encoder: Encoder) -> None:
    ours = encoder.embed(SENTENCES)
    reference = _transformers_embeddings(SENTENCES)
    assert ours.shape == reference.shape == (len(SENTENCES), DIM)
    cosines = np.sum(ours * reference, axis=1)  # both unit-norm
    assert np.all(cosines > 1 - 1e-4), cosines
    assert np.abs(ours - reference).max() < 1e-3


def test_batching_and_padding_do_not_change_an_embedding(encoder: Encoder) -> None:
    batched = encoder.embed(SENTENCES, batch_size=8)
    one_by_one = np.vstack([encoder.embed_one(s) for s in SENTENCES])
    assert np.abs(batched - one_by_one).max() < 1e-5
    assert np.allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-5)
    assert encoder.embed([]).shape == (0, DIM)


def test_the_gateway_embeds_without_torch_or_transformers() -> None:
    code = (
        "import sys\n"
        "import services.gateway.app, services.gateway.difficulty\n"
        "from services.common.embedding import Encoder\n"
        "Encoder.packaged().embed_one('What is 2 + 2?')\n"
        "heavy = sorted(m for m in ('torch', 'transformers') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root)
    assert done.returncode == 0, done.stderr
