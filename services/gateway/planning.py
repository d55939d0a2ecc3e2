"""From a validated request to a ``SearchJob``: one straight pipeline, the same for every request.

    inputs → effort and admission → task and difficulty → route → validate → job

Each step is entered once, in this order, whether the request pins a strategy (``ttc.strategy``)
or lets the routing table choose; nothing changes the job once the route step has built it.

The one decision that shapes the pipeline: a request that is invalid is a 400 whatever the
state of the server. So the steps that read the server's state *decide* and do not act. The
admission step looks up the model (404 when no deployment serves it, 503 when its deployment is
down) and the load (queue depth, the last polled KV utilization: degrade, or shed with 429), and
keeps the refusal; the job step raises it, after validation has had its say. A 400 is raised
where it is found: request-only checks first, then a contradictory effort or a ``max_tokens``
past the model's context window, then the validator's verdict on the built job (named
``ttc.<field>`` when the request pinned the strategy).

The table is the model's own (``TTC_GATEWAY_ROUTING_TABLES``), else the default (``Planner.routing``).

Everything happens before anything is enqueued, so a request that fails any check leaves the
queue untouched. The only compute spent is the difficulty probe, and only when the routing
table needs it for the applied effort, the request did not pin a strategy, and admission did
not already refuse it; otherwise the route step goes without one (a per-bin route takes the
table's middle bin).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from google.protobuf.struct_pb2 import Struct

from services.common.difficulty_features import estimation_text
from services.common.errors import InvalidArgument, ServiceError
from services.common.task_type import TaskType, classify_task
from services.common.tracing import inject_context
from services.gateway.admission import Decision, Thresholds, admit, normalize_effort
from services.gateway.difficulty import DifficultyEstimator, Estimate
from services.gateway.errors import HTTPError, request_field, too_many
from services.gateway.fleet import PolicyFleet
from services.gateway.job_inputs import JobInputs, job_inputs
from services.gateway.metrics import GatewayMetrics
from services.gateway.modality import ModalityClassifier
from services.gateway.model_tables import ModelRouting
from services.gateway.protocol import ChatCompletionRequest, CompletionRequest, Effort, top_logprobs_of
from services.gateway.routing import Route, RoutingTable, apply_overrides
from services.gateway.settings import GatewaySettings
from services.gateway.tracing import admission_attributes, tracer
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs import compat, validation
from services.jobs.record import JobKind, JobRecord, ModalityChoice, ProbeTokens, RecordBudget, StrategyFallback
from services.jobs.validation import JobValidator

DEFAULT_TEMPERATURE = 0.7
# Where each compat feature comes from in the request (for error messages).
_FEATURE_FIELDS = {"tools": "tools", "response_format": "response_format", "logprobs": "logprobs", "answers": "n > 1"}


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
    modality: ModalityChoice | None = None
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
            modality=self.modality,
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


@dataclass(frozen=True)
class Admission:
    """The effort and admission step's verdict: the effort to route with (or the shed), the served
    model and each answer's token cap (lowered to its context window when the cap was not the
    user's), or the model's refusal (404/503). The job step acts on it once the request is valid."""

    requested: Effort
    decision: Decision
    model: str  # the served model the request's name (or alias) resolves to
    max_tokens: int
    model_refusal: Exception | None = None

    @property
    def refused(self) -> bool:
        return self.model_refusal is not None or bool(self.decision.shed_reason)


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
        per_model: Mapping[str, ModelRouting] | None = None,
        modality: Mapping[str, ModalityClassifier] | None = None,
    ) -> None:
        """``table`` and ``estimator`` route every model that ``per_model`` (served name → its own
        table, ``TTC_GATEWAY_ROUTING_TABLES``) does not name; ``modality``: each one's classifier."""
        self.settings = settings
        self.validate_job = validate_job
        self.default_routing = ModelRouting(table, estimator)
        self.per_model = dict(per_model or {})
        self.modality = dict(modality or {})
        self.watch = watch
        self.metrics = metrics
        self.model_defaults = model_defaults
        self.default_effort = cast(Effort, settings.default_effort)
        self.thresholds = Thresholds(
            max_queue_depth=settings.max_queue_depth,
            degrade_queue_depth=settings.degrade_queue_depth,
            degrade_kv_utilization=settings.degrade_kv_utilization,
            shed_kv_utilization=settings.shed_kv_utilization,
        )

    async def plan(self, req: Request, queue_depth: int, owner: str = "") -> Plan:
        """The job to enqueue, or the first error the pipeline meets (module docstring)."""
        pinned = req.ttc is not None and req.ttc.strategy is not None
        inputs, max_tokens = self.check(req)
        admission = self.admit(req, queue_depth, max_tokens)
        task, estimate, modality = await self.difficulty(admission, inputs, pinned)
        plan = self.route(req, inputs, admission, task, estimate, owner)
        plan.modality = modality
        self.validate(plan.job, pinned)
        return self.admitted(plan, admission)

    def check(self, req: Request) -> tuple[JobInputs, int]:
        """Inputs: the checks that need nothing but the request; the job inputs and each answer's token cap."""
        if len(req.stop_list()) > 4:
            raise InvalidArgument("at most 4 stop sequences are allowed", field="stop")
        inputs = job_inputs(req)
        size = sum(len(text) for _, text in inputs.texts) + len(inputs.prompt)
        if size > self.settings.max_prompt_chars:
            raise InvalidArgument(
                f"the prompt has {size} characters, more than the limit of {self.settings.max_prompt_chars}",
                field=inputs.prompt_field,
            )
        max_tokens, field = answer_limit(req, self.settings.default_max_tokens)
        cap = self.settings.max_tokens_cap
        if cap and max_tokens > cap:
            if field != "max_tokens":  # the default, or a search-wide cap: each answer gets the server's cap
                max_tokens = cap
            else:
                raise InvalidArgument(f"{field}={max_tokens} exceeds this server's limit of {cap}", field=field)
        return inputs, max_tokens

    def admit(self, req: Request, queue_depth: int, max_tokens: int) -> Admission:
        """Effort and admission: the requested effort, what the load makes of it, and the model.

        Decides and does not act: a shed or a missing or down model is kept for the job step. Each
        answer fits the model's context window: an explicit ``max_tokens`` past it is a 400 here
        (the request's own fault); a cap that came from elsewhere is lowered to fit."""
        kv_utilization, model = self.watch.kv_utilization, self.watch.resolve(req.model)
        refusal: Exception | None = None
        try:
            info = self.watch.model(req.model)
        except (ServiceError, HTTPError) as err:  # 404 model_not_found, 503 its deployment is down
            refusal = err
        else:
            if info.max_context and max_tokens >= info.max_context:
                _, field = answer_limit(req, max_tokens)
                if field == "max_tokens":
                    raise InvalidArgument(
                        f"{field}={max_tokens} exceeds the context window of {req.model} ({info.max_context} tokens)",
                        field=field,
                    )
                max_tokens = int(info.max_context) - 1
        reasoning = req.reasoning.effort if isinstance(req, ChatCompletionRequest) and req.reasoning else None
        requested = normalize_effort(
            req.reasoning_effort, reasoning, req.model, self.model_defaults, self.default_effort
        )
        with tracer.start_as_current_span("gateway/admission") as span:
            decision = admit(requested, queue_depth, kv_utilization, self.thresholds)
            span.set_attributes(admission_attributes(decision, queue_depth, kv_utilization))
        return Admission(requested, decision, model, max_tokens, refusal)

    def routing(self, model: str) -> ModelRouting:
        """The table (and its estimator) that routes the served ``model``."""
        return self.per_model.get(model, self.default_routing)

    async def difficulty(
        self, admission: Admission, inputs: JobInputs, pinned: bool
    ) -> tuple[TaskType, Estimate | None, ModalityChoice | None]:
        """Task and difficulty: the task type (text rules, then for an ``open`` prompt the modality
        classifier; no tokens), and the difficulty estimate when the route needs one and it will be served."""
        text = estimation_text(inputs.texts, inputs.prompt)
        task = classify_task(text)
        if pinned or admission.refused:
            return task, None, None
        classifier = self.modality.get(admission.model)
        task, modality = await classifier.route(admission.decision.effort, task, text) if classifier else (task, None)
        routing = self.routing(admission.model)
        if routing.estimator is None or not routing.table.needs_difficulty(admission.decision.effort, task):
            return task, None, modality
        with tracer.start_as_current_span("gateway/difficulty") as span:
            estimate = await routing.estimator.estimate(admission.model, inputs.texts, inputs.prompt)
            span.set_attribute("ttc.difficulty", estimate.difficulty)
        return task, estimate, modality

    def route(
        self,
        req: Request,
        inputs: JobInputs,
        admission: Admission,
        task: TaskType,
        estimate: Estimate | None,
        owner: str,
    ) -> Plan:
        """Route: the table's route (with the request's ``ttc`` overrides), and the job built from it once.

        A strategy that cannot serve the request's tools, response_format, logprobs or n is a 400
        saying why when the request pinned it (``ttc.strategy``); a routed one is replaced by the
        one ``services/jobs/compat.py`` names, reported as ``ttc.strategy_fallback`` (never a
        silent downgrade)."""
        effort = admission.decision.effort
        table = self.routing(admission.model).table
        difficulty_bin = table.bin_of(estimate.difficulty) if estimate is not None else None
        route = apply_overrides(table.route(effort, difficulty_bin, task), req.ttc)
        job = self._job(req, inputs, admission, route, owner)
        fallback: StrategyFallback | None = None
        refused = compat.incompatibilities(job)
        if refused and req.ttc is not None and req.ttc.strategy is not None:
            feature, why = refused[0]
            raise InvalidArgument(f"{why} (the request asks for {_FEATURE_FIELDS[feature]})", field="ttc.strategy")
        if refused:
            reroute = compat.reroute(job)
            assert reroute is not None  # refused features always have a reroute
            fallback = StrategyFallback(
                requested=job.strategy.name, applied=reroute.strategy.name, reason=reroute.reason
            )
            job.strategy.CopyFrom(reroute.strategy)
        return Plan(
            job,
            route,
            admission.requested,
            effort,
            admission.decision.degraded_by,
            difficulty=estimate.difficulty if estimate is not None else None,
            difficulty_bin=difficulty_bin,
            probe=estimate,
            task_type=task,
            fallback=fallback,
        )

    def validate(self, job: orchestrator_pb2.SearchJob, pinned: bool) -> None:
        """Validate: the job validator's verdict; a pinned strategy's mistakes are named by the
        request's field (:func:`request_field`)."""
        try:
            self.validate_job(job)
        except InvalidArgument as err:
            if not pinned:
                raise
            raise InvalidArgument(err.message, field=request_field(err.field)) from err

    def admitted(self, plan: Plan, admission: Admission) -> Plan:
        """Job: the refusal admission decided, now that the request is valid (the model's 404/503,
        then the load's 429), else the plan, its degradations counted."""
        decision = admission.decision
        if admission.model_refusal is not None:
            raise admission.model_refusal
        if decision.shed_reason:
            self.metrics.shed.labels("queue_depth" if "queue" in decision.shed_reason else "kv_utilization").inc()
            raise too_many(f"server overloaded: {decision.shed_reason}", self.settings.retry_after_s, "overloaded")
        for signal in decision.degraded_by:
            self.metrics.degradations.labels(admission.requested, decision.effort, signal).inc()
        return plan

    def _job(
        self,
        req: Request,
        inputs: JobInputs,
        admission: Admission,
        route: Route,
        owner: str,
    ) -> orchestrator_pb2.SearchJob:
        """The job, whole: the request's inputs and sampling, the route's strategy and budget."""
        pinned_budget = req.ttc is not None and req.ttc.token_budget is not None
        # A routed budget never starves a single answer of the max_tokens the client asked for.
        budget = route.token_budget if pinned_budget else max(route.token_budget, admission.max_tokens)
        cap = search_cap(req)
        params = Struct()
        params.update(route.params)
        job = orchestrator_pb2.SearchJob(
            job_id=uuid.uuid4().hex,
            model=admission.model,
            messages=inputs.messages,
            prompt=inputs.prompt,
            temperature=req.temperature if req.temperature is not None else DEFAULT_TEMPERATURE,
            top_p=req.top_p if req.top_p is not None else 1.0,
            presence_penalty=req.presence_penalty or 0.0,
            frequency_penalty=req.frequency_penalty or 0.0,
            max_tokens=admission.max_tokens,
            stop=req.stop_list(),
            effort_requested=admission.requested,
            effort_applied=admission.decision.effort,
            trace_context=inject_context(),
            enqueued_at=time.time(),
            logprobs=req.wants_logprobs(),
            top_logprobs=top_logprobs_of(req),
            answers=req.choices(),
            stream_answer=bool(req.stream),
            # A request that waits reads only the result, and one that opted out of reasoning
            # (ttc.stream_reasoning: false) reads none of it: no reasoning events to publish.
            quiet=(not req.stream and not req.background) or not req.wants_reasoning(),
            owner=owner,  # the creating key's name: the trace store records it
            strategy=orchestrator_pb2.StrategySpec(
                name=route.strategy, n=route.n, verifier=route.verifier or "", params=params if route.params else None
            ),
            budget=orchestrator_pb2.Budget(
                max_generated_tokens=budget if cap is None else min(budget, cap),
                max_policy_calls=route.max_policy_calls,
                max_verifier_calls=route.max_verifier_calls,
                deadline_seconds=self.settings.job_timeout_s,
            ),
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
