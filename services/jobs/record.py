"""The job record: the Redis hash ``ttc:job:<id>`` as one typed model.

The gateway writes the whole record at enqueue (how to format the reply, status ``queued``);
the worker writes status fields (``running`` with ``started_at`` and ``worker``, then the
final status with ``finished_at`` and, on failure, ``error``); the gateway adds
``cancel_requested_at``. Every write goes through :meth:`JobRecord.to_redis` or
:func:`status_fields` and every read through :meth:`JobRecord.from_redis`, so both sides are
validated by this one model.

Wire shape (unchanged, so an old gateway and a new worker, or the reverse, interoperate):
one hash field per model field, each value JSON (``error`` a ``JobError`` object).

Reading rules, explicit:
- a missing field takes its default below (records written before a field existed still load);
- an unknown field (written by a newer peer) is ignored;
- a value that is not JSON is read as its text (what the old reader did);
- a field of the wrong type raises :class:`MalformedJobRecord` naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from services.jobs.errors import JobError

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
JobKind = Literal["chat.completion", "text_completion", "response"]


class MalformedJobRecord(ValueError):
    """A stored job record that does not validate; ``fields`` names the offending fields."""

    def __init__(self, job_key: str, fields: list[str], detail: str) -> None:
        super().__init__(f"job record {job_key!r} is malformed ({', '.join(fields) or 'record'}): {detail}")
        self.fields = fields


class ProbeTokens(BaseModel):
    """The gateway's difficulty-probe spend (counted into the reply's usage)."""

    model_config = ConfigDict(extra="ignore")

    prompt_tokens: int = 0
    generated_tokens: int = 0
    cached_tokens: int = 0


class RecordBudget(BaseModel):
    """The budget the job was given (reported back as ``ttc.budget``)."""

    model_config = ConfigDict(extra="ignore")

    max_generated_tokens: int = 0
    max_policy_calls: int = 0
    max_verifier_calls: int = 0
    deadline_seconds: float = 0.0


class StrategyFallback(BaseModel):
    """The routed strategy could not serve the request's tools, response format, logprobs or
    answers; ``applied`` ran instead (reported as ``ttc.strategy_fallback``)."""

    model_config = ConfigDict(extra="ignore")

    requested: str
    applied: str
    reason: str


class ModalityChoice(BaseModel):
    """The gateway's modality classifier on a prompt the task-type rules called ``open``: the
    probability that a program answers it better, the threshold, and the modality routed
    (``services/gateway/modality.py``; reported as ``ttc.modality``)."""

    model_config = ConfigDict(extra="ignore")

    task_type_by_rule: str
    program_probability: float
    threshold: float
    modality: Literal["program", "thought"]


class JobRecord(BaseModel):
    """One job's stored record: the gateway's formatting fields plus the status fields."""

    model_config = ConfigDict(extra="ignore")

    # Written by the gateway at enqueue: how to format the reply.
    kind: JobKind = "chat.completion"
    model: str = ""
    created_at: float = 0.0
    caller: str | None = None  # None (a record without it): visible to any caller
    include_usage: bool = False
    background: bool = False
    effort_requested: str = "none"
    effort_applied: str = "none"
    degraded_by: list[str] = Field(default_factory=list)
    difficulty: float | None = None
    difficulty_bin: str | None = None
    task_type: str | None = None
    modality: ModalityChoice | None = None
    strategy: str = ""
    n: int = 1
    verifier: str = ""
    budget: RecordBudget | None = None
    strategy_fallback: StrategyFallback | None = None
    logprobs: bool = False  # the reply carries the answers' token logprobs
    # kind "response": the Responses request fields its response object echoes (instructions,
    # tools, text, metadata, previous_response_id, store, ...), written by the gateway.
    response: dict[str, Any] | None = None
    probe: ProbeTokens = Field(default_factory=ProbeTokens)
    # Status fields: the gateway (queued, cancel_requested_at), the worker (the rest).
    status: JobStatus = "queued"
    enqueued_at: float | None = None
    started_at: float | None = None
    worker: str | None = None
    finished_at: float | None = None
    cancel_requested_at: float | None = None
    error: JobError | None = None

    @field_validator("probe", "degraded_by", mode="before")
    @classmethod
    def _null_is_default(cls, value: Any, info: Any) -> Any:
        """A stored ``null`` probe or degradation list reads as empty (old records wrote both)."""
        if value is None:
            return {} if info.field_name == "probe" else []
        return value

    @field_validator("error", mode="before")
    @classmethod
    def _error(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return JobError(**value)
        return value

    def queue_wait(self) -> float | None:
        """Seconds from enqueue to a worker's start, when both are known."""
        if self.started_at and self.enqueued_at:
            return max(0.0, self.started_at - self.enqueued_at)
        return None

    def to_redis(self, only: set[str] | None = None) -> dict[str, str]:
        """The hash fields to write (all, or ``only`` those named), each value JSON.

        Unset (``None``) fields are not written: a field is absent until someone sets it, so
        ``HSETNX`` on ``cancel_requested_at`` and ``"error" in record`` keep their meaning."""
        data = self.model_dump(mode="python", include=only, exclude_none=True)
        if "error" in data and self.error is not None:
            data["error"] = self.error.to_dict()
        return {key: json.dumps(value) for key, value in data.items()}

    @classmethod
    def from_redis(cls, raw: Mapping[Any, Any], job_key: str = "") -> JobRecord:
        """Read a hash as stored (bytes or str keys and values); see the module's reading rules."""
        data: dict[str, Any] = {}
        for key, value in raw.items():
            name = key.decode() if isinstance(key, bytes) else str(key)
            try:
                data[name] = json.loads(value)
            except (ValueError, TypeError):
                data[name] = value.decode() if isinstance(value, bytes) else value
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            fields = sorted({".".join(str(p) for p in err["loc"]) for err in exc.errors()})
            raise MalformedJobRecord(job_key, fields, str(exc.errors()[0]["msg"])) from exc
        except (TypeError, ValueError) as exc:  # a JobError that rejects its values
            raise MalformedJobRecord(job_key, ["error"], str(exc)) from exc


def status_fields(status: JobStatus, **fields: Any) -> dict[str, str]:
    """The hash fields for a status update: ``status`` plus the named status fields, validated."""
    unknown = set(fields) - set(JobRecord.model_fields)
    if unknown:
        raise ValueError(f"not job record fields: {sorted(unknown)}")
    record = JobRecord.model_validate({"status": status, **fields})
    return record.to_redis(only={"status", *fields})
