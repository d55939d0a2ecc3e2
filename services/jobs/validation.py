"""Structural validation of a ``SearchJob``, and the hook the gateway validates jobs through.

:func:`validate` checks what any job needs whatever its strategy (a strategy name, a problem
with known roles, a positive token budget, a finite deadline, sampling in range), with no
strategy code imported. The orchestrator's full ``validate_job``
(``services/search/run.py``) runs it first and then builds the strategy, which checks
the strategy's own parameters and verifier. The gateway depends only on :data:`JobValidator`:
its process entry point (``ttc serve gateway``, ``services/cli.py``) hands it the
orchestrator's full validation so a bad pinned strategy is refused with 400 before anything is
enqueued; a gateway built without one (unit tests) validates structurally and the worker
reports strategy-level mistakes as a typed ``INVALID_ARGUMENT`` job error (also a 400).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from services.common.errors import InvalidArgument
from services.common.json_constraint import SchemaError, check_metaschema, check_schema, parse_json_object
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs import compat

ROLES = ("system", "user", "assistant", "tool")
TOOL_CHOICES = ("auto", "none", "required")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_TOP_LOGPROBS = 20
MAX_ANSWERS = 64

JobValidator = Callable[[orchestrator_pb2.SearchJob], None]


def validate(job: orchestrator_pb2.SearchJob) -> None:
    """Raise ``InvalidArgument`` naming the field for a job no strategy could run."""
    if not job.strategy.name:
        raise InvalidArgument("a strategy name is required", field="strategy.name")
    if job.messages:
        _messages(job)
    elif not job.prompt:
        raise InvalidArgument("a job needs messages or a prompt", field="messages")
    budget = job.budget
    if budget.max_generated_tokens <= 0:
        raise InvalidArgument("the generated-token budget must be positive", field="budget.max_generated_tokens")
    if not math.isfinite(budget.deadline_seconds) or budget.deadline_seconds < 0:
        raise InvalidArgument("must be >= 0 (0 means no deadline)", field="budget.deadline_seconds")
    if not (math.isfinite(job.temperature) and 0.0 <= job.temperature <= 2.0):
        raise InvalidArgument("must be between 0 and 2", field="temperature")
    if not (math.isfinite(job.top_p) and 0.0 <= job.top_p <= 1.0):
        raise InvalidArgument("must be between 0 and 1", field="top_p")
    _tools(job)
    _response_format(job)
    if job.top_logprobs > MAX_TOP_LOGPROBS:
        raise InvalidArgument(f"must be between 0 and {MAX_TOP_LOGPROBS}", field="top_logprobs")
    if job.top_logprobs and not job.logprobs:
        raise InvalidArgument("top_logprobs needs logprobs", field="top_logprobs")
    if job.answers > MAX_ANSWERS:
        raise InvalidArgument(f"must be between 1 and {MAX_ANSWERS}", field="answers")
    compat.check(job)


def _messages(job: orchestrator_pb2.SearchJob) -> None:
    """Known roles; a tool turn answers a call an earlier assistant turn made."""
    calls: set[str] = set()
    for i, message in enumerate(job.messages):
        if message.role not in ROLES:
            raise InvalidArgument(f"unknown role {message.role!r}", field=f"messages[{i}].role")
        if message.tool_calls and message.role != "assistant":
            raise InvalidArgument("only assistant messages carry tool calls", field=f"messages[{i}].tool_calls")
        calls.update(c.id for c in message.tool_calls)
        if message.role == "tool" and message.tool_call_id not in calls:
            raise InvalidArgument(
                f"no earlier assistant tool call has id {message.tool_call_id!r}", field=f"messages[{i}].tool_call_id"
            )


def _tools(job: orchestrator_pb2.SearchJob) -> None:
    spec = job.tools
    names: set[str] = set()
    for i, tool in enumerate(spec.tools):
        if not TOOL_NAME.match(tool.name):
            raise InvalidArgument("must be 1-64 letters, digits, '_' or '-'", field=f"tools.tools[{i}].name")
        if tool.name in names:
            raise InvalidArgument(f"tool {tool.name!r} is defined twice", field=f"tools.tools[{i}].name")
        names.add(tool.name)
        if tool.parameters_json.strip():
            try:
                check_metaschema(parse_json_object(tool.parameters_json, "parameters schema"))
            except SchemaError as err:
                raise InvalidArgument(str(err), field=f"tools.tools[{i}].parameters_json") from None
    choice = spec.choice
    if choice and choice not in TOOL_CHOICES and choice not in names:
        raise InvalidArgument(f"names no tool and is not one of {', '.join(TOOL_CHOICES)}", field="tools.choice")
    if spec.tools and not job.messages:
        raise InvalidArgument("tools need chat messages, not a raw prompt", field="tools")


def _response_format(job: orchestrator_pb2.SearchJob) -> None:
    if job.response_format.WhichOneof("kind") == "json_schema":
        try:
            check_schema(job.response_format.json_schema)
        except SchemaError as err:
            raise InvalidArgument(str(err), field="response_format.json_schema") from None
