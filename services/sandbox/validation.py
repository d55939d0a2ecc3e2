"""Request validation: every refusal names the field, and happens before anything runs."""

from __future__ import annotations

import posixpath

from services.common.errors import InvalidArgument, require
from services.gen.ttc.v1 import sandbox_pb2
from services.sandbox.settings import SandboxSettings

# Accepted spellings of the one language served now; the contract leaves room for more.
LANGUAGES = {"": "python", "python": "python", "python3": "python", "py": "python"}
PROGRAM_NAME = "main.py"
MAX_PATH_CHARS = 255
MAX_TEST_NAME_CHARS = 200


def language_of(request: sandbox_pb2.ExecuteRequest) -> str:
    """The canonical language name; unknown languages are refused."""
    key = request.language.strip().lower()
    if key not in LANGUAGES:
        raise InvalidArgument(f"unknown language {request.language!r}; supported: python", field="language")
    return LANGUAGES[key]


def check_file_path(path: str, field: str) -> str:
    """A file's path relative to the working directory: no escapes, no reserved name."""
    require(bool(path), field, "must not be empty")
    require(len(path) <= MAX_PATH_CHARS, field, f"longer than {MAX_PATH_CHARS} characters")
    require("\x00" not in path, field, "contains a NUL byte")
    require(not path.startswith("/"), field, "must be relative to the working directory")
    normal = posixpath.normpath(path)
    require(normal not in (".", "..") and not normal.startswith("../"), field, "must stay inside the working directory")
    require(normal != PROGRAM_NAME, field, f"{PROGRAM_NAME!r} is reserved for the program")
    return normal


def validate_request(request: sandbox_pb2.ExecuteRequest, settings: SandboxSettings) -> None:
    """Refuse empty code, unknown languages, malformed files/tests and oversized payloads."""
    language_of(request)
    require(bool(request.code.strip()), "code", "must not be empty")
    code_bytes = len(request.code.encode("utf-8", "surrogatepass"))
    require(code_bytes <= settings.max_code_bytes, "code", f"{code_bytes} bytes exceeds {settings.max_code_bytes}")

    n_files, n_tests = len(request.files), len(request.tests)
    require(n_files <= settings.max_files, "files", f"{n_files} files exceeds {settings.max_files}")
    seen: set[str] = set()
    for i, f in enumerate(request.files):
        normal = check_file_path(f.path, f"files[{i}].path")
        require(normal not in seen, f"files[{i}].path", f"duplicate path {normal!r}")
        seen.add(normal)

    require(n_tests <= settings.max_tests, "tests", f"{n_tests} tests exceeds {settings.max_tests}")
    for i, t in enumerate(request.tests):
        require(len(t.name) <= MAX_TEST_NAME_CHARS, f"tests[{i}].name", f"longer than {MAX_TEST_NAME_CHARS} characters")
        require(
            t.HasField("expected_stdout") or bool(t.check_code.strip()),
            f"tests[{i}]",
            "needs expected_stdout or check_code",
        )

    sizes = {
        "code": code_bytes,
        "stdin": len(request.stdin),
        "files": sum(len(f.content) + len(f.path) for f in request.files),
        "tests": sum(len(t.stdin) + len(t.expected_stdout) + len(t.check_code) for t in request.tests),
    }
    total = sum(sizes.values())
    if total > settings.max_payload_bytes:
        largest = max(sizes, key=lambda k: sizes[k])
        raise InvalidArgument(
            f"request payload of {total} bytes exceeds {settings.max_payload_bytes} (largest part: {largest})",
            field=largest,
        )
