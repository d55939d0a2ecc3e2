from services.gen.ttc.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FinishReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FINISH_REASON_UNSPECIFIED: _ClassVar[FinishReason]
    FINISH_REASON_STOP: _ClassVar[FinishReason]
    FINISH_REASON_LENGTH: _ClassVar[FinishReason]
    FINISH_REASON_ABORT: _ClassVar[FinishReason]
FINISH_REASON_UNSPECIFIED: FinishReason
FINISH_REASON_STOP: FinishReason
FINISH_REASON_LENGTH: FinishReason
FINISH_REASON_ABORT: FinishReason

class PromptInput(_message.Message):
    __slots__ = ("messages", "prompt", "assistant_prefix", "tools")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    ASSISTANT_PREFIX_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_common_pb2.ChatMessage]
    prompt: str
    assistant_prefix: str
    tools: _common_pb2.ToolSpec
    def __init__(self, messages: _Optional[_Iterable[_Union[_common_pb2.ChatMessage, _Mapping]]] = ..., prompt: _Optional[str] = ..., assistant_prefix: _Optional[str] = ..., tools: _Optional[_Union[_common_pb2.ToolSpec, _Mapping]] = ...) -> None: ...

class SamplingParams(_message.Message):
    __slots__ = ("n", "seeds", "base_seed", "max_tokens", "temperature", "top_p", "stop", "logprobs", "top_logprobs", "constraint", "presence_penalty", "frequency_penalty")
    N_FIELD_NUMBER: _ClassVar[int]
    SEEDS_FIELD_NUMBER: _ClassVar[int]
    BASE_SEED_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    n: int
    seeds: _containers.RepeatedScalarFieldContainer[int]
    base_seed: int
    max_tokens: int
    temperature: float
    top_p: float
    stop: _containers.RepeatedScalarFieldContainer[str]
    logprobs: bool
    top_logprobs: int
    constraint: _common_pb2.OutputConstraint
    presence_penalty: float
    frequency_penalty: float
    def __init__(self, n: _Optional[int] = ..., seeds: _Optional[_Iterable[int]] = ..., base_seed: _Optional[int] = ..., max_tokens: _Optional[int] = ..., temperature: _Optional[float] = ..., top_p: _Optional[float] = ..., stop: _Optional[_Iterable[str]] = ..., logprobs: _Optional[bool] = ..., top_logprobs: _Optional[int] = ..., constraint: _Optional[_Union[_common_pb2.OutputConstraint, _Mapping]] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ...) -> None: ...

class GenerateRequest(_message.Message):
    __slots__ = ("model", "input", "sampling", "request_id", "chunk_interval_ms")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CHUNK_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    model: str
    input: PromptInput
    sampling: SamplingParams
    request_id: str
    chunk_interval_ms: int
    def __init__(self, model: _Optional[str] = ..., input: _Optional[_Union[PromptInput, _Mapping]] = ..., sampling: _Optional[_Union[SamplingParams, _Mapping]] = ..., request_id: _Optional[str] = ..., chunk_interval_ms: _Optional[int] = ...) -> None: ...

class Candidate(_message.Message):
    __slots__ = ("index", "text", "finish_reason", "completion_tokens", "seed", "logprobs", "tool_calls")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    index: int
    text: str
    finish_reason: FinishReason
    completion_tokens: int
    seed: int
    logprobs: _containers.RepeatedCompositeFieldContainer[_common_pb2.TokenLogprob]
    tool_calls: _containers.RepeatedCompositeFieldContainer[_common_pb2.ToolCall]
    def __init__(self, index: _Optional[int] = ..., text: _Optional[str] = ..., finish_reason: _Optional[_Union[FinishReason, str]] = ..., completion_tokens: _Optional[int] = ..., seed: _Optional[int] = ..., logprobs: _Optional[_Iterable[_Union[_common_pb2.TokenLogprob, _Mapping]]] = ..., tool_calls: _Optional[_Iterable[_Union[_common_pb2.ToolCall, _Mapping]]] = ...) -> None: ...

class GenerateResponse(_message.Message):
    __slots__ = ("model", "candidates", "usage")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    model: str
    candidates: _containers.RepeatedCompositeFieldContainer[Candidate]
    usage: _common_pb2.Usage
    def __init__(self, model: _Optional[str] = ..., candidates: _Optional[_Iterable[_Union[Candidate, _Mapping]]] = ..., usage: _Optional[_Union[_common_pb2.Usage, _Mapping]] = ...) -> None: ...

class GenerateChunk(_message.Message):
    __slots__ = ("index", "text_delta", "finish_reason", "usage", "tool_calls", "completion_tokens", "prompt_tokens", "cached_tokens", "logprobs")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    index: int
    text_delta: str
    finish_reason: FinishReason
    usage: _common_pb2.Usage
    tool_calls: _containers.RepeatedCompositeFieldContainer[_common_pb2.ToolCall]
    completion_tokens: int
    prompt_tokens: int
    cached_tokens: int
    logprobs: _containers.RepeatedCompositeFieldContainer[_common_pb2.TokenLogprob]
    def __init__(self, index: _Optional[int] = ..., text_delta: _Optional[str] = ..., finish_reason: _Optional[_Union[FinishReason, str]] = ..., usage: _Optional[_Union[_common_pb2.Usage, _Mapping]] = ..., tool_calls: _Optional[_Iterable[_Union[_common_pb2.ToolCall, _Mapping]]] = ..., completion_tokens: _Optional[int] = ..., prompt_tokens: _Optional[int] = ..., cached_tokens: _Optional[int] = ..., logprobs: _Optional[_Iterable[_Union[_common_pb2.TokenLogprob, _Mapping]]] = ...) -> None: ...

class ScoreRequest(_message.Message):
    __slots__ = ("model", "input", "continuations", "top_logprobs", "request_id")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    CONTINUATIONS_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    model: str
    input: PromptInput
    continuations: _containers.RepeatedScalarFieldContainer[str]
    top_logprobs: int
    request_id: str
    def __init__(self, model: _Optional[str] = ..., input: _Optional[_Union[PromptInput, _Mapping]] = ..., continuations: _Optional[_Iterable[str]] = ..., top_logprobs: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class ContinuationScore(_message.Message):
    __slots__ = ("tokens", "total_logprob")
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LOGPROB_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedCompositeFieldContainer[_common_pb2.TokenLogprob]
    total_logprob: float
    def __init__(self, tokens: _Optional[_Iterable[_Union[_common_pb2.TokenLogprob, _Mapping]]] = ..., total_logprob: _Optional[float] = ...) -> None: ...

class ScoreResponse(_message.Message):
    __slots__ = ("model", "scores", "usage")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    model: str
    scores: _containers.RepeatedCompositeFieldContainer[ContinuationScore]
    usage: _common_pb2.Usage
    def __init__(self, model: _Optional[str] = ..., scores: _Optional[_Iterable[_Union[ContinuationScore, _Mapping]]] = ..., usage: _Optional[_Union[_common_pb2.Usage, _Mapping]] = ...) -> None: ...

class TokenizeRequest(_message.Message):
    __slots__ = ("model", "input")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    model: str
    input: PromptInput
    def __init__(self, model: _Optional[str] = ..., input: _Optional[_Union[PromptInput, _Mapping]] = ...) -> None: ...

class TokenizeResponse(_message.Message):
    __slots__ = ("token_ids", "count", "max_context")
    TOKEN_IDS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    token_ids: _containers.RepeatedScalarFieldContainer[int]
    count: int
    max_context: int
    def __init__(self, token_ids: _Optional[_Iterable[int]] = ..., count: _Optional[int] = ..., max_context: _Optional[int] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class EngineStats(_message.Message):
    __slots__ = ("engine", "model", "kv_cache_utilization", "running_requests", "waiting_requests", "prefix_cache_queries", "prefix_cache_hits", "max_context", "peak_batch_requests")
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    KV_CACHE_UTILIZATION_FIELD_NUMBER: _ClassVar[int]
    RUNNING_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    WAITING_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    PREFIX_CACHE_QUERIES_FIELD_NUMBER: _ClassVar[int]
    PREFIX_CACHE_HITS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PEAK_BATCH_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    engine: str
    model: str
    kv_cache_utilization: float
    running_requests: int
    waiting_requests: int
    prefix_cache_queries: int
    prefix_cache_hits: int
    max_context: int
    peak_batch_requests: int
    def __init__(self, engine: _Optional[str] = ..., model: _Optional[str] = ..., kv_cache_utilization: _Optional[float] = ..., running_requests: _Optional[int] = ..., waiting_requests: _Optional[int] = ..., prefix_cache_queries: _Optional[int] = ..., prefix_cache_hits: _Optional[int] = ..., max_context: _Optional[int] = ..., peak_batch_requests: _Optional[int] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ("id", "engine", "max_context")
    ID_FIELD_NUMBER: _ClassVar[int]
    ENGINE_FIELD_NUMBER: _ClassVar[int]
    MAX_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    id: str
    engine: str
    max_context: int
    def __init__(self, id: _Optional[str] = ..., engine: _Optional[str] = ..., max_context: _Optional[int] = ...) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[ModelInfo]
    def __init__(self, models: _Optional[_Iterable[_Union[ModelInfo, _Mapping]]] = ...) -> None: ...
