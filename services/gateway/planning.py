"""From a validated request to a ``SearchJob``: effort, admission, difficulty, route, budget.

Everything here happens before anything is enqueued, so a request that fails any check
leaves the queue untouched. The only compute spent is the difficulty probe, and only when
the routing table needs it for the applied effort and the request did not pin a strategy.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from google.protobuf.struct_pb2 import Struct

from services.common.difficulty_features import estimation_text
from services.common.errors import InvalidArgument
from services.common.task_type import TaskType, classify_task
from services.common.tracing import inject_context
from services.gateway.admission import Decision, Thresholds, admit
from services.gateway.difficulty import DifficultyEstimator, Estimate
from services.gateway.effort import normalize_effort
from services.gateway.errors import too_many
from services.gateway.metrics import GatewayMetrics
from services.gateway.protocol import ChatCompletionRequest, CompletionRequest, Effort
from services.gateway.routing import Route, RoutingTable, apply_overrides
from services.gateway.settings import GatewaySettings
from services.gateway.tracing import admission_attributes, tracer
from services.gateway.upstream import PolicyWatch
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2
from services.jobs import validation
from services.jobs.record import JobKind, JobRecord, ProbeTokens, RecordBudget
from services.jobs.validation import JobValidator

DEFAULT_TEMPERATURE = 0.7


@dataclass
class Plan:
    job: orchestrator_pb2.SearchJob
    route: Route
    effort_requested: Effort
    effort_applied: Effort
    degraded_by: list[str] = field(default_factory=list)
    difficulty: float | None = None
    difficulty_bin: str | None = None
    probe: Estimate | None = None
    task_type: TaskType | None = None

    def record(self, kind: JobKind, caller: str, include_usage: bool, background: bool) -> JobRecord:
        """What the job hash stores so any gateway replica can format the reply later."""
        probe = self.probe
        budget = self.job.budget
        return JobRecord(
            kind=kind,
            model=self.job.model,
            created_at=self.job.enqueued_at,
            caller=caller,
            include_usage=include_usage,
            background=background,
            effort_requested=self.effort_requested,
            effort_applied=self.effort_applied,
            degraded_by=self.degraded_by,
            difficulty=self.difficulty,
            difficulty_bin=self.difficulty_bin,
            task_type=self.task_type,
            strategy=self.route.strategy,
            n=self.route.n,
            verifier=self.route.verifier or "",
            budget=RecordBudget(
                max_generated_tokens=budget.max_generated_tokens,
                max_policy_calls=budget.max_policy_calls,
                max_verifier_calls=budget.max_verifier_calls,
                deadline_seconds=budget.deadline_seconds,
            ),
            probe=ProbeTokens(
                prompt_tokens=probe.prompt_tokens if probe else 0,
                generated_tokens=probe.generated_tokens if probe else 0,
                cached_tokens=probe.cached_tokens if probe else 0,
            ),
        )


Request = ChatCompletionRequest | CompletionRequest


def _max_tokens_field(req: Request) -> str:
    """The field the request set its per-candidate limit in (for error messages)."""
    if isinstance(req, ChatCompletionRequest) and req.max_completion_tokens is not None:
        return "max_completion_tokens"
    return "max_tokens"


def _prompt_parts(req: Request) -> tuple[list[tuple[str, str]], str, str]:
    """(messages, raw prompt, field name) with the emptiness check OpenAI clients expect."""
    if isinstance(req, ChatCompletionRequest):
        messages: list[tuple[str, str]] = [
            (str(m.role) if m.role != "developer" else "system", m.text()) for m in req.messages
        ]
        if not any(text.strip() for _, text in messages):
            raise InvalidArgument("the prompt is empty: every message has empty content", field="messages")
        return messages, "", "messages"
    prompts = [req.prompt] if isinstance(req.prompt, str) else req.prompt
    if len(prompts) != 1:
        raise InvalidArgument("exactly one prompt per request is supported", field="prompt")
    if not prompts[0].strip():
        raise InvalidArgument("the prompt is empty", field="prompt")
    if req.echo:
        raise InvalidArgument("echo is not supported", field="echo")
    if req.suffix:
        raise InvalidArgument("suffix is not supported", field="suffix")
    return [], prompts[0], "prompt"


class Planner:
    def __init__(
        self,
        settings: GatewaySettings,
        table: RoutingTable,
        estimator: DifficultyEstimator | None,
        watch: PolicyWatch,
        metrics: GatewayMetrics,
        model_defaults: dict[str, Effort],
        validate_job: JobValidator = validation.validate,
    ) -> None:
        self.settings = settings
        self.validate_job = validate_job
        self.table = table
        self.estimator = estimator
        self.watch = watch
        self.metrics = metrics
        self.model_defaults = model_defaults
        self.thresholds = Thresholds(
            max_queue_depth=settings.max_queue_depth,
            degrade_queue_depth=settings.degrade_queue_depth,
            degrade_kv_utilization=settings.degrade_kv_utilization,
            shed_kv_utilization=settings.shed_kv_utilization,
        )

    def check(self, req: Request) -> tuple[list[tuple[str, str]], str, int]:
        """Checks that need nothing but the request: returns (messages, prompt, max_tokens)."""
        messages, prompt, prompt_field = _prompt_parts(req)
        size = sum(len(text) for _, text in messages) + len(prompt)
        if size > self.settings.max_prompt_chars:
            raise InvalidArgument(
                f"the prompt has {size} characters, more than the limit of {self.settings.max_prompt_chars}",
                field=prompt_field,
            )
        if len(req.stop_list()) > 4:
            raise InvalidArgument("at most 4 stop sequences are allowed", field="stop")
        max_tokens = req.requested_max_tokens() or self.settings.default_max_tokens
        cap = self.settings.max_tokens_cap
        if cap and max_tokens > cap:
            if req.requested_max_tokens() is None:
                max_tokens = cap
            else:
                field = _max_tokens_field(req)
                raise InvalidArgument(f"{field}={max_tokens} exceeds this server's limit of {cap}", field=field)
        return messages, prompt, max_tokens

    def check_model(self, req: Request, max_tokens: int) -> None:
        """The model exists (404; 503 when the policy is down) and ``max_tokens`` fits its context window."""
        info = self.watch.model(req.model)
        if info.max_context and max_tokens >= info.max_context:
            field = _max_tokens_field(req)
            raise InvalidArgument(
                f"{field}={max_tokens} exceeds the context window of {req.model} ({info.max_context} tokens)",
                field=field,
            )

    async def plan(self, req: Request, queue_depth: int) -> Plan:
        """Validate, admit, estimate difficulty and route: the job to enqueue, or an exception.

        One pass: the job is built once, routed once, filled once and validated once. Order
        matters: request-only checks first (400 even when the policy is down); a pinned strategy
        needs no difficulty estimate, so its job is complete here and is validated before anything
        that could answer 503 or 429 (400 naming ``ttc.<field>``); then the model (404/503), then
        admission (429), and only then the difficulty probe's compute and a routed job's validation.
        """
        messages, prompt, max_tokens = self.check(req)
        reasoning = req.reasoning.effort if isinstance(req, ChatCompletionRequest) and req.reasoning else None
        requested = normalize_effort(
            req.reasoning_effort, reasoning, req.model, self.model_defaults, self._default_effort()
        )
        pinned = req.ttc is not None and req.ttc.strategy is not None
        # The decision is pure (queue depth, the last polled KV utilization); it is acted on
        # (shed, counted) only after the model check, but the applied effort routes the job now.
        with tracer.start_as_current_span("gateway/admission") as span:
            decision = admit(requested, queue_depth, self.watch.kv_utilization, self.thresholds)
            span.set_attributes(admission_attributes(decision, queue_depth, self.watch.kv_utilization))
        task = classify_task(estimation_text(messages, prompt))  # pure text rules, no tokens
        job = self._job(req, messages, prompt, max_tokens, requested, decision.effort)
        plan: Plan | None = None
        if pinned:
            plan = self._route(job, req, requested, decision, task, None)
            self._validate(plan, pinned=True)
        self.check_model(req, max_tokens)
        if decision.shed:
            self.metrics.shed.labels("queue_depth" if "queue" in decision.shed_reason else "kv_utilization").inc()
            raise too_many(f"server overloaded: {decision.shed_reason}", self.settings.retry_after_s, "overloaded")
        for signal in decision.degraded_by:
            self.metrics.degradations.labels(requested, decision.effort, signal).inc()
        if plan is None:
            estimate = None
            if self.table.needs_difficulty(decision.effort, task) and self.estimator is not None:
                with tracer.start_as_current_span("gateway/difficulty") as span:
                    estimate = await self.estimator.estimate(req.model, messages, prompt)
                    span.set_attribute("ttc.difficulty", estimate.difficulty)
            plan = self._route(job, req, requested, decision, task, estimate)
            self._validate(plan, pinned=False)
        return plan

    def _route(
        self,
        job: orchestrator_pb2.SearchJob,
        req: Request,
        requested: Effort,
        decision: Decision,
        task: TaskType,
        estimate: Estimate | None,
    ) -> Plan:
        """The job's one route (the table's, with the request's ``ttc`` overrides), filled in."""
        difficulty_bin = self.table.bin_of(estimate.difficulty) if estimate is not None else None
        route = apply_overrides(self.table.route(decision.effort, difficulty_bin, task), req.ttc)
        plan = Plan(job, route, requested, decision.effort, decision.degraded_by, task_type=task)
        if estimate is not None:
            plan.probe, plan.difficulty, plan.difficulty_bin = estimate, estimate.difficulty, difficulty_bin
        self._fill(plan, req)
        return plan

    def _validate(self, plan: Plan, pinned: bool) -> None:
        """The job validator's verdict; a pinned strategy's mistakes are named ``ttc.<field>``."""
        try:
            self.validate_job(plan.job)
        except InvalidArgument as err:
            if not pinned:
                raise
            leaf = err.field.rsplit(".", 1)[-1] if err.field else ""
            raise InvalidArgument(err.message, field=f"ttc.{leaf}" if leaf else "ttc") from err

    def _default_effort(self) -> Effort:
        from typing import cast

        return cast(Effort, self.settings.default_effort)

    def _job(
        self,
        req: Request,
        messages: list[tuple[str, str]],
        prompt: str,
        max_tokens: int,
        requested: Effort,
        applied: Effort,
    ) -> orchestrator_pb2.SearchJob:
        job = orchestrator_pb2.SearchJob(
            job_id=uuid.uuid4().hex,
            model=req.model,
            messages=[common_pb2.ChatMessage(role=r, content=c) for r, c in messages],
            prompt=prompt,
            temperature=req.temperature if req.temperature is not None else DEFAULT_TEMPERATURE,
            top_p=req.top_p if req.top_p is not None else 1.0,
            max_tokens=max_tokens,
            stop=req.stop_list(),
            effort_requested=requested,
            effort_applied=applied,
            trace_context=inject_context(),
            enqueued_at=time.time(),
        )
        if req.seed is not None:
            job.seed = req.seed
        if req.ttc is not None and req.ttc.reference:
            job.reference = req.ttc.reference
        return job

    def _fill(self, plan: Plan, req: Request) -> None:
        route, job = plan.route, plan.job
        job.strategy.name = route.strategy
        job.strategy.n = route.n
        job.strategy.verifier = route.verifier or ""
        if route.params:
            params = Struct()
            params.update(route.params)
            job.strategy.params.CopyFrom(params)
        pinned_budget = req.ttc is not None and req.ttc.token_budget is not None
        # A routed budget never starves a single answer of the max_tokens the client asked for.
        job.budget.max_generated_tokens = (
            route.token_budget if pinned_budget else max(route.token_budget, job.max_tokens)
        )
        job.budget.max_policy_calls = route.max_policy_calls
        job.budget.max_verifier_calls = route.max_verifier_calls
        job.budget.deadline_seconds = self.settings.job_timeout_s
        if plan.difficulty is not None:
            job.difficulty = plan.difficulty
