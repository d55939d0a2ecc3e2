"""What a confidence reads from the prompt: its task type and its prior, one rule for serving and fitting.

``ttc.confidence`` depends on the prompt as well as the vote (docs/confidence.md): its task type
by the gateway's rules, and the prior, a linear model of the prompt's zero-token features
(``difficulty_features``: the MiniLM embedding, text counts, task type) shipped in the
confidence model. The worker applies it to a live answer (``services/search/strategies/
signals.py``) and calibration to replayed ones (``evaluation/``); both call :func:`with_prompt`
on the same text (``estimation_text``), so the served features are the fitted ones.

The encoder is the numpy MiniLM the gateway's difficulty estimator uses (loaded once per
process, well under a second; tens of milliseconds a prompt on one core); features are cached
per text, so a cascade that bounds its small vote, scores it and then the answer embeds the
prompt once. Where the encoder's
package is missing, or the model's priors were fitted on another feature layout, the prior is
``None`` (the feature reads 0, as for a model without priors) and a warning is logged once.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import replace

from services.common.confidence import Calibrator, ConfidenceSignals, prior_kind
from services.common.difficulty_features import FEATURE_SET, difficulty_features
from services.common.embedding import Encoder
from services.common.task_type import classify_task

log = logging.getLogger(__name__)


@functools.cache
def _encoder() -> Encoder | None:
    try:
        return Encoder.packaged()
    except (ImportError, OSError, ValueError) as exc:  # a slim image without the MiniLM wheel
        log.warning("confidence prior disabled: no prompt encoder (%s)", exc)
        return None


@functools.lru_cache(maxsize=1024)
def prompt_features(text: str) -> tuple[float, ...] | None:
    """The prompt's feature vector (``difficulty_features.FEATURE_NAMES``), ``None`` without
    the encoder."""
    encoder = _encoder()
    if encoder is None:
        return None
    vector = encoder.embed_one(text)
    return tuple(float(x) for x in difficulty_features(vector, text))


@functools.cache
def _layout_mismatch(layout: str) -> bool:
    if layout and layout != FEATURE_SET:
        log.warning("confidence prior disabled: fitted on features %r, this code computes %r", layout, FEATURE_SET)
        return True
    return False


def prior_of(model: Calibrator, family: str, text: str) -> float | None:
    """The prompt's prior for a configuration family under ``model`` (``None`` where the model
    has no prior for it or the features cannot be computed)."""
    if prior_kind(family) not in model.priors or _layout_mismatch(model.prior_features):
        return None  # no embedding computed where nothing would read it
    return model.prior(family, prompt_features(text))


def with_prompt(signals: ConfidenceSignals, text: str, model: Calibrator) -> ConfidenceSignals:
    """``signals`` with what the prompt ``text`` says: its task type and its prior."""
    return replace(signals, task_type=classify_task(text), prior=prior_of(model, signals.family, text))
