from google.protobuf import struct_pb2 as _struct_pb2
from services.gen.ttc.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Termination(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TERMINATION_UNSPECIFIED: _ClassVar[Termination]
    TERMINATION_SOLVED: _ClassVar[Termination]
    TERMINATION_BUDGET: _ClassVar[Termination]
    TERMINATION_DEADLINE: _ClassVar[Termination]
    TERMINATION_ERROR: _ClassVar[Termination]
    TERMINATION_CANCELLED: _ClassVar[Termination]
    TERMINATION_COMPLETED: _ClassVar[Termination]
TERMINATION_UNSPECIFIED: Termination
TERMINATION_SOLVED: Termination
TERMINATION_BUDGET: Termination
TERMINATION_DEADLINE: Termination
TERMINATION_ERROR: Termination
TERMINATION_CANCELLED: Termination
TERMINATION_COMPLETED: Termination

class Budget(_message.Message):
    __slots__ = ("max_generated_tokens", "max_policy_calls", "max_verifier_calls", "deadline_seconds")
    MAX_GENERATED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_POLICY_CALLS_FIELD_NUMBER: _ClassVar[int]
    MAX_VERIFIER_CALLS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    max_generated_tokens: int
    max_policy_calls: int
    max_verifier_calls: int
    deadline_seconds: float
    def __init__(self, max_generated_tokens: _Optional[int] = ..., max_policy_calls: _Optional[int] = ..., max_verifier_calls: _Optional[int] = ..., deadline_seconds: _Optional[float] = ...) -> None: ...

class StrategySpec(_message.Message):
    __slots__ = ("name", "n", "verifier", "params")
    NAME_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    name: str
    n: int
    verifier: str
    params: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., n: _Optional[int] = ..., verifier: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SearchJob(_message.Message):
    __slots__ = ("job_id", "model", "messages", "prompt", "strategy", "budget", "temperature", "top_p", "max_tokens", "stop", "seed", "reference", "effort_requested", "effort_applied", "trace_context", "enqueued_at", "tools", "response_format", "logprobs", "top_logprobs", "answers", "stream_answer", "owner", "quiet", "presence_penalty", "frequency_penalty")
    class TraceContextEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    EFFORT_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    EFFORT_APPLIED_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ENQUEUED_AT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    STREAM_ANSWER_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    QUIET_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    model: str
    messages: _containers.RepeatedCompositeFieldContainer[_common_pb2.ChatMessage]
    prompt: str
    strategy: StrategySpec
    budget: Budget
    temperature: float
    top_p: float
    max_tokens: int
    stop: _containers.RepeatedScalarFieldContainer[str]
    seed: int
    reference: str
    effort_requested: str
    effort_applied: str
    trace_context: _containers.ScalarMap[str, str]
    enqueued_at: float
    tools: _common_pb2.ToolSpec
    response_format: _common_pb2.OutputConstraint
    logprobs: bool
    top_logprobs: int
    answers: int
    stream_answer: bool
    owner: str
    quiet: bool
    presence_penalty: float
    frequency_penalty: float
    def __init__(self, job_id: _Optional[str] = ..., model: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_common_pb2.ChatMessage, _Mapping]]] = ..., prompt: _Optional[str] = ..., strategy: _Optional[_Union[StrategySpec, _Mapping]] = ..., budget: _Optional[_Union[Budget, _Mapping]] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., max_tokens: _Optional[int] = ..., stop: _Optional[_Iterable[str]] = ..., seed: _Optional[int] = ..., reference: _Optional[str] = ..., effort_requested: _Optional[str] = ..., effort_applied: _Optional[str] = ..., trace_context: _Optional[_Mapping[str, str]] = ..., enqueued_at: _Optional[float] = ..., tools: _Optional[_Union[_common_pb2.ToolSpec, _Mapping]] = ..., response_format: _Optional[_Union[_common_pb2.OutputConstraint, _Mapping]] = ..., logprobs: _Optional[bool] = ..., top_logprobs: _Optional[int] = ..., answers: _Optional[int] = ..., stream_answer: _Optional[bool] = ..., owner: _Optional[str] = ..., quiet: _Optional[bool] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ...) -> None: ...

class BudgetUse(_message.Message):
    __slots__ = ("generated_tokens", "prompt_tokens", "cached_tokens", "policy_calls", "verifier_calls", "wall_seconds", "sandbox_runs", "sandbox_seconds", "verifier_prompt_tokens", "verifier_cached_tokens", "verifier_generated_tokens", "probe_prompt_tokens", "probe_cached_tokens", "probe_generated_tokens")
    GENERATED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    POLICY_CALLS_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_CALLS_FIELD_NUMBER: _ClassVar[int]
    WALL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_RUNS_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_SECONDS_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_GENERATED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PROBE_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PROBE_CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PROBE_GENERATED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    generated_tokens: int
    prompt_tokens: int
    cached_tokens: int
    policy_calls: int
    verifier_calls: int
    wall_seconds: float
    sandbox_runs: int
    sandbox_seconds: float
    verifier_prompt_tokens: int
    verifier_cached_tokens: int
    verifier_generated_tokens: int
    probe_prompt_tokens: int
    probe_cached_tokens: int
    probe_generated_tokens: int
    def __init__(self, generated_tokens: _Optional[int] = ..., prompt_tokens: _Optional[int] = ..., cached_tokens: _Optional[int] = ..., policy_calls: _Optional[int] = ..., verifier_calls: _Optional[int] = ..., wall_seconds: _Optional[float] = ..., sandbox_runs: _Optional[int] = ..., sandbox_seconds: _Optional[float] = ..., verifier_prompt_tokens: _Optional[int] = ..., verifier_cached_tokens: _Optional[int] = ..., verifier_generated_tokens: _Optional[int] = ..., probe_prompt_tokens: _Optional[int] = ..., probe_cached_tokens: _Optional[int] = ..., probe_generated_tokens: _Optional[int] = ...) -> None: ...

class SearchResult(_message.Message):
    __slots__ = ("job_id", "answer", "finish_reason", "strategy", "termination", "budget_used", "candidates_generated", "verifier_score", "verifier_passed", "trace_id", "error", "answer_tokens", "candidates_saved", "tokens_saved", "tool_calls", "logprobs", "alternatives", "started_at", "reasoning", "confidence", "adaptive")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    TERMINATION_FIELD_NUMBER: _ClassVar[int]
    BUDGET_USED_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_GENERATED_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_SCORE_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_PASSED_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ANSWER_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_SAVED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_SAVED_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    ALTERNATIVES_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    ADAPTIVE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    answer: str
    finish_reason: str
    strategy: str
    termination: Termination
    budget_used: BudgetUse
    candidates_generated: int
    verifier_score: float
    verifier_passed: bool
    trace_id: str
    error: str
    answer_tokens: int
    candidates_saved: int
    tokens_saved: int
    tool_calls: _containers.RepeatedCompositeFieldContainer[_common_pb2.ToolCall]
    logprobs: _containers.RepeatedCompositeFieldContainer[_common_pb2.TokenLogprob]
    alternatives: _containers.RepeatedCompositeFieldContainer[Answer]
    started_at: float
    reasoning: str
    confidence: float
    adaptive: AdaptiveCourse
    def __init__(self, job_id: _Optional[str] = ..., answer: _Optional[str] = ..., finish_reason: _Optional[str] = ..., strategy: _Optional[str] = ..., termination: _Optional[_Union[Termination, str]] = ..., budget_used: _Optional[_Union[BudgetUse, _Mapping]] = ..., candidates_generated: _Optional[int] = ..., verifier_score: _Optional[float] = ..., verifier_passed: _Optional[bool] = ..., trace_id: _Optional[str] = ..., error: _Optional[str] = ..., answer_tokens: _Optional[int] = ..., candidates_saved: _Optional[int] = ..., tokens_saved: _Optional[int] = ..., tool_calls: _Optional[_Iterable[_Union[_common_pb2.ToolCall, _Mapping]]] = ..., logprobs: _Optional[_Iterable[_Union[_common_pb2.TokenLogprob, _Mapping]]] = ..., alternatives: _Optional[_Iterable[_Union[Answer, _Mapping]]] = ..., started_at: _Optional[float] = ..., reasoning: _Optional[str] = ..., confidence: _Optional[float] = ..., adaptive: _Optional[_Union[AdaptiveCourse, _Mapping]] = ...) -> None: ...

class AdaptiveCourse(_message.Message):
    __slots__ = ("first_wave", "first_wave_settled", "steps", "stopped")
    FIRST_WAVE_FIELD_NUMBER: _ClassVar[int]
    FIRST_WAVE_SETTLED_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    STOPPED_FIELD_NUMBER: _ClassVar[int]
    first_wave: int
    first_wave_settled: bool
    steps: _containers.RepeatedScalarFieldContainer[str]
    stopped: str
    def __init__(self, first_wave: _Optional[int] = ..., first_wave_settled: _Optional[bool] = ..., steps: _Optional[_Iterable[str]] = ..., stopped: _Optional[str] = ...) -> None: ...

class Answer(_message.Message):
    __slots__ = ("text", "tool_calls", "finish_reason", "logprobs", "votes", "score", "reasoning")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    VOTES_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    text: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[_common_pb2.ToolCall]
    finish_reason: str
    logprobs: _containers.RepeatedCompositeFieldContainer[_common_pb2.TokenLogprob]
    votes: int
    score: float
    reasoning: str
    def __init__(self, text: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[_common_pb2.ToolCall, _Mapping]]] = ..., finish_reason: _Optional[str] = ..., logprobs: _Optional[_Iterable[_Union[_common_pb2.TokenLogprob, _Mapping]]] = ..., votes: _Optional[int] = ..., score: _Optional[float] = ..., reasoning: _Optional[str] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("stage", "message", "budget_used")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_USED_FIELD_NUMBER: _ClassVar[int]
    stage: str
    message: str
    budget_used: BudgetUse
    def __init__(self, stage: _Optional[str] = ..., message: _Optional[str] = ..., budget_used: _Optional[_Union[BudgetUse, _Mapping]] = ...) -> None: ...

class ReasoningDelta(_message.Message):
    __slots__ = ("source", "kind", "text")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    source: str
    kind: str
    text: str
    def __init__(self, source: _Optional[str] = ..., kind: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class ReasoningDeltas(_message.Message):
    __slots__ = ("deltas",)
    DELTAS_FIELD_NUMBER: _ClassVar[int]
    deltas: _containers.RepeatedCompositeFieldContainer[ReasoningDelta]
    def __init__(self, deltas: _Optional[_Iterable[_Union[ReasoningDelta, _Mapping]]] = ...) -> None: ...

class JobEvent(_message.Message):
    __slots__ = ("job_id", "sequence", "progress", "answer_delta", "result", "reasoning")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    ANSWER_DELTA_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    sequence: int
    progress: Progress
    answer_delta: str
    result: SearchResult
    reasoning: ReasoningDeltas
    def __init__(self, job_id: _Optional[str] = ..., sequence: _Optional[int] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., answer_delta: _Optional[str] = ..., result: _Optional[_Union[SearchResult, _Mapping]] = ..., reasoning: _Optional[_Union[ReasoningDeltas, _Mapping]] = ...) -> None: ...

class GetTraceRequest(_message.Message):
    __slots__ = ("trace_id",)
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    def __init__(self, trace_id: _Optional[str] = ...) -> None: ...

class TraceNode(_message.Message):
    __slots__ = ("id", "parent_id", "action", "text", "score", "visits", "seed", "tokens", "chosen", "execution")
    ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    VISITS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    CHOSEN_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_FIELD_NUMBER: _ClassVar[int]
    id: str
    parent_id: str
    action: str
    text: str
    score: float
    visits: int
    seed: int
    tokens: int
    chosen: bool
    execution: ProgramExecution
    def __init__(self, id: _Optional[str] = ..., parent_id: _Optional[str] = ..., action: _Optional[str] = ..., text: _Optional[str] = ..., score: _Optional[float] = ..., visits: _Optional[int] = ..., seed: _Optional[int] = ..., tokens: _Optional[int] = ..., chosen: _Optional[bool] = ..., execution: _Optional[_Union[ProgramExecution, _Mapping]] = ...) -> None: ...

class ProgramExecution(_message.Message):
    __slots__ = ("status", "stdout", "stderr", "exit_code", "wall_seconds", "answer")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    WALL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    status: str
    stdout: str
    stderr: str
    exit_code: int
    wall_seconds: float
    answer: str
    def __init__(self, status: _Optional[str] = ..., stdout: _Optional[str] = ..., stderr: _Optional[str] = ..., exit_code: _Optional[int] = ..., wall_seconds: _Optional[float] = ..., answer: _Optional[str] = ...) -> None: ...

class SearchTrace(_message.Message):
    __slots__ = ("trace_id", "job", "nodes", "result")
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    trace_id: str
    job: SearchJob
    nodes: _containers.RepeatedCompositeFieldContainer[TraceNode]
    result: SearchResult
    def __init__(self, trace_id: _Optional[str] = ..., job: _Optional[_Union[SearchJob, _Mapping]] = ..., nodes: _Optional[_Iterable[_Union[TraceNode, _Mapping]]] = ..., result: _Optional[_Union[SearchResult, _Mapping]] = ...) -> None: ...
