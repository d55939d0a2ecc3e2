"""From a validated request to a ``SearchJob``: effort, admission, difficulty, route, budget.

Everything here happens before anything is enqueued, so a request that fails any check
leaves the queue untouched. The only compute spent is the difficulty probe, and only when
the routing table needs it for the applied effort and the request did not pin a strategy.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.struct_pb2 import Struct

from services.common.difficulty_features import estimation_text
from services.common.errors import InvalidArgument
from services.common.task_type import TaskType, classify_task
from services.common.tracing import inject_context
from services.gateway.admission import Decision, Thresholds, admit
from services.gateway.difficulty import DifficultyEstimator, Estimate
from services.gateway.effort import normalize_effort
from services.gateway.errors import too_many
from services.gateway.fleet import PolicyFleet
from services.gateway.job_inputs import JobInputs, job_inputs
from services.gateway.metrics import GatewayMetrics
from services.gateway.protocol import ChatCompletionRequest, CompletionRequest, Effort, top_logprobs_of
from services.gateway.routing import Route, RoutingTable, apply_overrides
from services.gateway.settings import GatewaySettings
from services.gateway.tracing import admission_attributes, tracer
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs import compat, validation
from services.jobs.record import JobKind, JobRecord, ProbeTokens, RecordBudget, StrategyFallback
from services.jobs.validation import JobValidator

DEFAULT_TEMPERATURE = 0.7
# Where each compat feature comes from in the request (for error messages).
_FEATURE_FIELDS = {
    "tools": "tools",
    "response_format": "response_format",
    "logprobs": "logprobs",
    "answers": "n > 1",
}


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
    fallback: StrategyFallback | None = None

    def record(
        self,
        kind: JobKind,
        caller: str,
        include_usage: bool,
        background: bool,
        response: dict[str, Any] | None = None,
    ) -> JobRecord:
        """What the job hash stores so any gateway replica can format the reply later
        (``response``: the Responses request fields its response object echoes)."""
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
            strategy=self.job.strategy.name,
            n=self.job.strategy.n,
            verifier=self.job.strategy.verifier,
            strategy_fallback=self.fallback,
            logprobs=self.job.logprobs,
            response=response,
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


def answer_limit(req: Request, default: int) -> tuple[int, str | None]:
    """Each visible answer's token cap and the field that set it (None: the server default).

    ``max_tokens`` caps each answer; ``max_completion_tokens`` caps the whole search (its
    budget) and, when ``max_tokens`` is absent, each answer too (one answer cannot outspend the
    search). Legacy completions default ``max_tokens`` to 16 as OpenAI does: a default is not the
    user's, so a server cap lowers it instead of refusing the request."""
    if req.max_tokens is not None:
        return req.max_tokens, "max_tokens" if "max_tokens" in req.model_fields_set else None
    if isinstance(req, ChatCompletionRequest) and req.max_completion_tokens is not None:
        return req.max_completion_tokens, "max_completion_tokens"
    return default, None


def search_cap(req: Request) -> int | None:
    """``max_completion_tokens``: the cap on every token the search generates, hidden reasoning included."""
    return req.max_completion_tokens if isinstance(req, ChatCompletionRequest) else None


class Planner:
    def __init__(
        self,
        settings: GatewaySettings,
        table: RoutingTable,
        estimator: DifficultyEstimator | None,
        watch: PolicyFleet,
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

    def check(self, req: Request) -> tuple[JobInputs, int]:
        """Checks that need nothing but the request: returns (job inputs, each answer's token cap)."""
        inputs = job_inputs(req)
        size = sum(len(text) for _, text in inputs.texts) + len(inputs.prompt)
        if size > self.settings.max_prompt_chars:
            raise InvalidArgument(
                f"the prompt has {size} characters, more than the limit of {self.settings.max_prompt_chars}",
                field=inputs.prompt_field,
            )
        if len(req.stop_list()) > 4:
            raise InvalidArgument("at most 4 stop sequences are allowed", field="stop")
        max_tokens, field = answer_limit(req, self.settings.default_max_tokens)
        cap = self.settings.max_tokens_cap
        if cap and max_tokens > cap:
            if field != "max_tokens":  # the default, or a search-wide cap: each answer gets the server's cap
                max_tokens = cap
            else:
                raise InvalidArgument(f"{field}={max_tokens} exceeds this server's limit of {cap}", field=field)
        return inputs, max_tokens

    def check_model(self, req: Request, max_tokens: int) -> int:
        """The model exists (404; 503 when the policy is down) and each answer fits its context window
        (400 for an explicit ``max_tokens``; a cap that came from ``max_completion_tokens`` is lowered)."""
        info = self.watch.model(req.model)
        if info.max_context and max_tokens >= info.max_context:
            _, field = answer_limit(req, max_tokens)
            if field != "max_tokens":
                return int(info.max_context) - 1
            raise InvalidArgument(
                f"{field}={max_tokens} exceeds the context window of {req.model} ({info.max_context} tokens)",
                field=field,
            )
        return max_tokens

    async def plan(self, req: Request, queue_depth: int, owner: str = "") -> Plan:
        """Validate, admit, estimate difficulty and route: the job to enqueue, or an exception.

        One pass: the job is built once, routed once, filled once and validated once. Order
        matters: request-only checks first (400 even when the policy is down); a pinned strategy
        needs no difficulty estimate, so its job is complete here and is validated before anything
        that could answer 503 or 429 (400 naming ``ttc.<field>``); then the model (404/503), then
        admission (429), and only then the difficulty probe's compute and a routed job's validation.
        """
        inputs, max_tokens = self.check(req)
        messages, prompt = inputs.texts, inputs.prompt
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
        job = self._job(req, inputs, max_tokens, requested, decision.effort, owner)
        plan: Plan | None = None
        if pinned:
            plan = self._route(job, req, requested, decision, task, None)
            self._validate(plan, pinned=True)
        job.max_tokens = self.check_model(req, max_tokens)
        if decision.shed:
            self.metrics.shed.labels("queue_depth" if "queue" in decision.shed_reason else "kv_utilization").inc()
            raise too_many(f"server overloaded: {decision.shed_reason}", self.settings.retry_after_s, "overloaded")
        for signal in decision.degraded_by:
            self.metrics.degradations.labels(requested, decision.effort, signal).inc()
        if plan is None:
            estimate = None
            if self.table.needs_difficulty(decision.effort, task) and self.estimator is not None:
                with tracer.start_as_current_span("gateway/difficulty") as span:
                    estimate = await self.estimator.estimate(job.model, messages, prompt)
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
        self._fit_features(plan, req)
        return plan

    def _fit_features(self, plan: Plan, req: Request) -> None:
        """A strategy that can serve the request's tools, response_format, logprobs and n.

        A pinned strategy that cannot is a 400 saying why (``ttc.strategy``); a routed one is
        replaced by the one ``services/jobs/compat.py`` names, reported as ``ttc.strategy_fallback``
        (never a silent downgrade)."""
        job = plan.job
        refused = compat.incompatibilities(job)
        if not refused:
            return
        if req.ttc is not None and req.ttc.strategy is not None:
            feature, why = refused[0]
            raise InvalidArgument(f"{why} (the request asks for {_FEATURE_FIELDS[feature]})", field="ttc.strategy")
        fallback = compat.reroute(job)
        assert fallback is not None  # refused features always have a reroute
        requested = job.strategy.name
        job.strategy.CopyFrom(fallback.strategy)
        plan.fallback = StrategyFallback(requested=requested, applied=job.strategy.name, reason=fallback.reason)

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
        self, req: Request, inputs: JobInputs, max_tokens: int, requested: Effort, applied: Effort, owner: str
    ) -> orchestrator_pb2.SearchJob:
        job = orchestrator_pb2.SearchJob(
            job_id=uuid.uuid4().hex,
            model=self.watch.resolve(req.model),  # an alias names the served model
            messages=inputs.messages,
            prompt=inputs.prompt,
            temperature=req.temperature if req.temperature is not None else DEFAULT_TEMPERATURE,
            top_p=req.top_p if req.top_p is not None else 1.0,
            presence_penalty=req.presence_penalty or 0.0,
            frequency_penalty=req.frequency_penalty or 0.0,
            max_tokens=max_tokens,
            stop=req.stop_list(),
            effort_requested=requested,
            effort_applied=applied,
            trace_context=inject_context(),
            enqueued_at=time.time(),
            logprobs=req.wants_logprobs(),
            top_logprobs=top_logprobs_of(req),
            answers=req.choices(),
            stream_answer=bool(req.stream),
            # A request that waits reads only the result: no progress events to publish.
            quiet=not req.stream and not req.background,
            owner=owner,  # the creating key's name: the trace store records it
        )
        if inputs.tools is not None:
            job.tools.CopyFrom(inputs.tools)
        if inputs.response_format is not None:
            job.response_format.CopyFrom(inputs.response_format)
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
        routed = route.token_budget if pinned_budget else max(route.token_budget, job.max_tokens)
        cap = search_cap(req)
        job.budget.max_generated_tokens = routed if cap is None else min(routed, cap)
        job.budget.max_policy_calls = route.max_policy_calls
        job.budget.max_verifier_calls = route.max_verifier_calls
        job.budget.deadline_seconds = self.settings.job_timeout_s
        if plan.difficulty is not None:
            job.difficulty = plan.difficulty
