from services.gen.ttc.v1 import common_pb2 as _common_pb2
from services.gen.ttc.v1 import sandbox_pb2 as _sandbox_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StepAggregation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STEP_AGGREGATION_UNSPECIFIED: _ClassVar[StepAggregation]
    STEP_AGGREGATION_MIN: _ClassVar[StepAggregation]
    STEP_AGGREGATION_PRODUCT: _ClassVar[StepAggregation]
    STEP_AGGREGATION_MEAN: _ClassVar[StepAggregation]
    STEP_AGGREGATION_LAST: _ClassVar[StepAggregation]
STEP_AGGREGATION_UNSPECIFIED: StepAggregation
STEP_AGGREGATION_MIN: StepAggregation
STEP_AGGREGATION_PRODUCT: StepAggregation
STEP_AGGREGATION_MEAN: StepAggregation
STEP_AGGREGATION_LAST: StepAggregation

class WeightedVerifier(_message.Message):
    __slots__ = ("name", "weight")
    NAME_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    name: str
    weight: float
    def __init__(self, name: _Optional[str] = ..., weight: _Optional[float] = ...) -> None: ...

class CodeSpec(_message.Message):
    __slots__ = ("tests", "entry_point", "limits")
    TESTS_FIELD_NUMBER: _ClassVar[int]
    ENTRY_POINT_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    tests: _containers.RepeatedCompositeFieldContainer[_sandbox_pb2.TestCase]
    entry_point: str
    limits: _sandbox_pb2.Limits
    def __init__(self, tests: _Optional[_Iterable[_Union[_sandbox_pb2.TestCase, _Mapping]]] = ..., entry_point: _Optional[str] = ..., limits: _Optional[_Union[_sandbox_pb2.Limits, _Mapping]] = ...) -> None: ...

class VerifyRequest(_message.Message):
    __slots__ = ("verifier", "problem", "candidates", "reference", "code", "aggregation", "ensemble", "format_pattern", "model", "request_id")
    VERIFIER_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    AGGREGATION_FIELD_NUMBER: _ClassVar[int]
    ENSEMBLE_FIELD_NUMBER: _ClassVar[int]
    FORMAT_PATTERN_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    verifier: str
    problem: _containers.RepeatedCompositeFieldContainer[_common_pb2.ChatMessage]
    candidates: _containers.RepeatedScalarFieldContainer[str]
    reference: str
    code: CodeSpec
    aggregation: StepAggregation
    ensemble: _containers.RepeatedCompositeFieldContainer[WeightedVerifier]
    format_pattern: str
    model: str
    request_id: str
    def __init__(self, verifier: _Optional[str] = ..., problem: _Optional[_Iterable[_Union[_common_pb2.ChatMessage, _Mapping]]] = ..., candidates: _Optional[_Iterable[str]] = ..., reference: _Optional[str] = ..., code: _Optional[_Union[CodeSpec, _Mapping]] = ..., aggregation: _Optional[_Union[StepAggregation, str]] = ..., ensemble: _Optional[_Iterable[_Union[WeightedVerifier, _Mapping]]] = ..., format_pattern: _Optional[str] = ..., model: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class CandidateVerdict(_message.Message):
    __slots__ = ("score", "passed", "step_scores", "extracted_answer", "feedback", "error")
    SCORE_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    STEP_SCORES_FIELD_NUMBER: _ClassVar[int]
    EXTRACTED_ANSWER_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    score: float
    passed: bool
    step_scores: _containers.RepeatedScalarFieldContainer[float]
    extracted_answer: str
    feedback: str
    error: str
    def __init__(self, score: _Optional[float] = ..., passed: _Optional[bool] = ..., step_scores: _Optional[_Iterable[float]] = ..., extracted_answer: _Optional[str] = ..., feedback: _Optional[str] = ..., error: _Optional[str] = ...) -> None: ...

class VerifyResponse(_message.Message):
    __slots__ = ("verdicts", "usage")
    VERDICTS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    verdicts: _containers.RepeatedCompositeFieldContainer[CandidateVerdict]
    usage: _common_pb2.Usage
    def __init__(self, verdicts: _Optional[_Iterable[_Union[CandidateVerdict, _Mapping]]] = ..., usage: _Optional[_Union[_common_pb2.Usage, _Mapping]] = ...) -> None: ...

class ListVerifiersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class VerifierInfo(_message.Message):
    __slots__ = ("name", "needs_reference", "needs_code", "generative")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NEEDS_REFERENCE_FIELD_NUMBER: _ClassVar[int]
    NEEDS_CODE_FIELD_NUMBER: _ClassVar[int]
    GENERATIVE_FIELD_NUMBER: _ClassVar[int]
    name: str
    needs_reference: bool
    needs_code: bool
    generative: bool
    def __init__(self, name: _Optional[str] = ..., needs_reference: _Optional[bool] = ..., needs_code: _Optional[bool] = ..., generative: _Optional[bool] = ...) -> None: ...

class ListVerifiersResponse(_message.Message):
    __slots__ = ("verifiers",)
    VERIFIERS_FIELD_NUMBER: _ClassVar[int]
    verifiers: _containers.RepeatedCompositeFieldContainer[VerifierInfo]
    def __init__(self, verifiers: _Optional[_Iterable[_Union[VerifierInfo, _Mapping]]] = ...) -> None: ...
