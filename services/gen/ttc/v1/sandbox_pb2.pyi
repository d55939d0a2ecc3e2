from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ExecStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXEC_STATUS_UNSPECIFIED: _ClassVar[ExecStatus]
    EXEC_STATUS_OK: _ClassVar[ExecStatus]
    EXEC_STATUS_RUNTIME_ERROR: _ClassVar[ExecStatus]
    EXEC_STATUS_TIMEOUT: _ClassVar[ExecStatus]
    EXEC_STATUS_MEMORY_LIMIT: _ClassVar[ExecStatus]
    EXEC_STATUS_OUTPUT_LIMIT: _ClassVar[ExecStatus]
    EXEC_STATUS_SANDBOX_ERROR: _ClassVar[ExecStatus]
EXEC_STATUS_UNSPECIFIED: ExecStatus
EXEC_STATUS_OK: ExecStatus
EXEC_STATUS_RUNTIME_ERROR: ExecStatus
EXEC_STATUS_TIMEOUT: ExecStatus
EXEC_STATUS_MEMORY_LIMIT: ExecStatus
EXEC_STATUS_OUTPUT_LIMIT: ExecStatus
EXEC_STATUS_SANDBOX_ERROR: ExecStatus

class ExecFile(_message.Message):
    __slots__ = ("path", "content")
    PATH_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    path: str
    content: bytes
    def __init__(self, path: _Optional[str] = ..., content: _Optional[bytes] = ...) -> None: ...

class Limits(_message.Message):
    __slots__ = ("cpu_seconds", "wall_seconds", "memory_bytes", "max_processes", "max_output_bytes")
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    WALL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_PROCESSES_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    cpu_seconds: float
    wall_seconds: float
    memory_bytes: int
    max_processes: int
    max_output_bytes: int
    def __init__(self, cpu_seconds: _Optional[float] = ..., wall_seconds: _Optional[float] = ..., memory_bytes: _Optional[int] = ..., max_processes: _Optional[int] = ..., max_output_bytes: _Optional[int] = ...) -> None: ...

class TestCase(_message.Message):
    __slots__ = ("name", "stdin", "expected_stdout", "check_code")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_STDOUT_FIELD_NUMBER: _ClassVar[int]
    CHECK_CODE_FIELD_NUMBER: _ClassVar[int]
    name: str
    stdin: bytes
    expected_stdout: bytes
    check_code: str
    def __init__(self, name: _Optional[str] = ..., stdin: _Optional[bytes] = ..., expected_stdout: _Optional[bytes] = ..., check_code: _Optional[str] = ...) -> None: ...

class ExecuteRequest(_message.Message):
    __slots__ = ("language", "code", "stdin", "files", "tests", "limits", "request_id")
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    TESTS_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    language: str
    code: str
    stdin: bytes
    files: _containers.RepeatedCompositeFieldContainer[ExecFile]
    tests: _containers.RepeatedCompositeFieldContainer[TestCase]
    limits: Limits
    request_id: str
    def __init__(self, language: _Optional[str] = ..., code: _Optional[str] = ..., stdin: _Optional[bytes] = ..., files: _Optional[_Iterable[_Union[ExecFile, _Mapping]]] = ..., tests: _Optional[_Iterable[_Union[TestCase, _Mapping]]] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class RunOutcome(_message.Message):
    __slots__ = ("status", "stdout", "stderr", "stdout_truncated", "stderr_truncated", "exit_code", "signal", "cpu_seconds", "wall_seconds", "peak_memory_bytes")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    STDERR_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    WALL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PEAK_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    status: ExecStatus
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    exit_code: int
    signal: int
    cpu_seconds: float
    wall_seconds: float
    peak_memory_bytes: int
    def __init__(self, status: _Optional[_Union[ExecStatus, str]] = ..., stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., stdout_truncated: _Optional[bool] = ..., stderr_truncated: _Optional[bool] = ..., exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., cpu_seconds: _Optional[float] = ..., wall_seconds: _Optional[float] = ..., peak_memory_bytes: _Optional[int] = ...) -> None: ...

class TestVerdict(_message.Message):
    __slots__ = ("name", "passed", "outcome")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    name: str
    passed: bool
    outcome: RunOutcome
    def __init__(self, name: _Optional[str] = ..., passed: _Optional[bool] = ..., outcome: _Optional[_Union[RunOutcome, _Mapping]] = ...) -> None: ...

class ExecuteResponse(_message.Message):
    __slots__ = ("outcome", "tests", "message")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    TESTS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    outcome: RunOutcome
    tests: _containers.RepeatedCompositeFieldContainer[TestVerdict]
    message: str
    def __init__(self, outcome: _Optional[_Union[RunOutcome, _Mapping]] = ..., tests: _Optional[_Iterable[_Union[TestVerdict, _Mapping]]] = ..., message: _Optional[str] = ...) -> None: ...
