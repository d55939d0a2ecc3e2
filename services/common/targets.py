"""Per-model gRPC targets, ``"model=host:port,..."``: one parser for every service that routes by model
(the workers' policy deployments, the verifier's judges)."""

from __future__ import annotations


def parse_targets(text: str) -> dict[str, str]:
    """``"model=host:port,model2=host:port"`` as a mapping; ``ValueError`` naming a bad entry."""
    targets: dict[str, str] = {}
    for entry in (e.strip() for e in text.split(",")):
        if not entry:
            continue
        model, sep, target = (part.strip() for part in entry.partition("="))
        if not sep or not model or not target or ":" not in target:
            raise ValueError(f"expected model=host:port, got {entry!r}")
        if model in targets:
            raise ValueError(f"model {model!r} is listed twice")
        targets[model] = target
    return targets
