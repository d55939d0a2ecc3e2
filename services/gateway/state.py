"""``Gateway``: everything a request needs, built once per app by ``build_app`` (``app.py``) and
kept on ``app.state.gateway``.

The routers read it through ``routers/deps.py``; it lives in its own module so that nothing
imports the app module back."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import redis.asyncio as aioredis

from services.gateway.auth import Authenticator
from services.gateway.fleet import PolicyFleet
from services.gateway.metrics import GatewayMetrics
from services.gateway.model_tables import ModelTables
from services.gateway.responses.service import ResponsesService
from services.gateway.serving import Serving
from services.gateway.settings import GatewaySettings
from services.jobs.trace_store import TraceStore


@dataclass
class Gateway:
    """Everything a request needs, built once per app."""

    settings: GatewaySettings
    redis: aioredis.Redis
    watch: PolicyFleet
    serving: Serving
    traces: TraceStore
    auth: Authenticator
    metrics: GatewayMetrics
    responses: ResponsesService
    tables: ModelTables  # the objects the planner routes with: the ladder card reads these
    started: int = field(default_factory=lambda: int(time.time()))
