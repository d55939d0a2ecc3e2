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
    """Keys to caller names; admin keys (``TTC_GATEWAY_ADMIN_API_KEYS``) authenticate the same way
    and make their caller an admin, who reads every key's jobs, traces and stored responses."""

    def __init__(self, keys: dict[str, str], admin_keys: dict[str, str] | None = None) -> None:
        admin_keys = admin_keys or {}
        clash = set(admin_keys.values()) & set(keys.values())
        if clash:
            raise ValueError(f"admin key names {sorted(clash)} are also API key names; give admin keys their own names")
        self.keys = {**keys, **admin_keys}
        self.admins = frozenset(admin_keys.values())

    @property
    def enabled(self) -> bool:
        return bool(self.keys)

    def sees_all(self, caller: str) -> bool:
        """Whether ``caller`` reads every key's resources: an admin, or anyone when authentication
        is off (every caller is then the same anonymous one)."""
        return not self.enabled or caller in self.admins

    def owner_filter(self, caller: str) -> str | None:
        """The owner a lookup must match: ``None`` (any) for those who see all, else ``caller``."""
        return None if self.sees_all(caller) else caller

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
