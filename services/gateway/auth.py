"""Bearer-token authentication per API key.

Keys come from ``TTC_GATEWAY_API_KEYS`` as ``key`` or ``name:key`` entries; the name (or a
short prefix of the key) labels the caller in limits and logs so keys never reach logs.
An empty list turns authentication off (local development, tests of other parts).
"""

from __future__ import annotations

import hmac

from services.gateway.errors import unauthorized

ANONYMOUS = "anonymous"


def parse_api_keys(spec: str) -> dict[str, str]:
    """``"alice:sk-1,sk-2"`` → ``{"sk-1": "alice", "sk-2": "key-sk-2"}`` (key → caller name)."""
    keys: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, sep, key = item.partition(":")
        if not sep:
            name, key = f"key-{item[:4]}", item
        if not key:
            raise ValueError(f"empty API key in entry {item!r}")
        keys[key] = name
    return keys


class Authenticator:
    def __init__(self, keys: dict[str, str]) -> None:
        self.keys = keys

    @property
    def enabled(self) -> bool:
        return bool(self.keys)

    def caller(self, authorization: str | None) -> str:
        """The caller's name for an ``Authorization`` header; raises a 401 ``HTTPError`` otherwise."""
        if not self.enabled:
            return ANONYMOUS
        if not authorization:
            raise unauthorized("missing API key: send `Authorization: Bearer <key>`")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise unauthorized("malformed Authorization header: expected `Bearer <key>`")
        token = token.strip()
        for key, name in self.keys.items():
            if hmac.compare_digest(key.encode(), token.encode()):
                return name
        raise unauthorized("incorrect API key provided")
