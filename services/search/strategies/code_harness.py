"""The program the sandbox runs for one ``code_execution`` candidate, and how its output is read.

:func:`harness` defines the candidate in a module of its own (its ``__main__`` block not run,
its prints swallowed) and calls the function on every input under a per-input alarm, printing
one marked line per input: the canonical repr of the result (sets sorted, ``2.0`` as ``2``,
long values hashed) or the exception's type name, and whether the model's assertion held.
:func:`parse_run` reads those lines back into a :class:`~.code_behaviour.Behaviour`. Each line
is flushed as it is written, so a run killed at its wall limit still reports the inputs it
finished.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from services.search.strategies.code_behaviour import Behaviour, Case, candidate_source, function_to_call

# A line the harness prints starts with this; anything the candidate prints is swallowed anyway.
MARK = "@@ttc-case@@ "

_HARNESS = r"""
import contextlib as _ttc_contextlib, hashlib as _ttc_hashlib, io as _ttc_io, json as _ttc_json
import signal as _ttc_signal, sys as _ttc_sys, types as _ttc_types
_ttc_out = _ttc_sys.stdout
class _TtcTimeout(BaseException):
    pass
def _ttc_alarm(signum, frame):
    raise _TtcTimeout()
_ttc_signal.signal(_ttc_signal.SIGALRM, _ttc_alarm)
def _ttc_canon(v, depth=0):
    if depth > 30:
        return "..."
    if v is None or isinstance(v, bool):
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if v != v else format(v, ".9g")
    if isinstance(v, complex):
        return "complex:" + repr(v)
    if isinstance(v, (str, bytes)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_ttc_canon(x, depth + 1) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(_ttc_canon(x, depth + 1) for x in v) + ")"
    if isinstance(v, (set, frozenset)):
        return "{" + ", ".join(sorted(_ttc_canon(x, depth + 1) for x in v)) + "}"
    if isinstance(v, dict):
        items = sorted(_ttc_canon(k, depth + 1) + ": " + _ttc_canon(x, depth + 1) for k, x in v.items())
        return "dict{" + ", ".join(items) + "}"
    text = repr(v)
    return type(v).__name__ + (":" + text if " at 0x" not in text else "")
def _ttc_short(text):
    if len(text) <= 400:
        return text
    return text[:300] + "#" + _ttc_hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]
def _ttc_emit(i, result, passed):
    _ttc_out.write(_TTC_MARK + _ttc_json.dumps([i, result, passed]) + "\n")
    _ttc_out.flush()
_ttc_module = _ttc_types.ModuleType("__candidate__")
_ttc_sys.modules["__candidate__"] = _ttc_module
_ttc_ns = _ttc_module.__dict__
try:
    with _ttc_contextlib.redirect_stdout(_ttc_io.StringIO()):
        _ttc_signal.setitimer(_ttc_signal.ITIMER_REAL, _TTC_LIMIT * 2)
        exec(compile(_TTC_SOURCE, "candidate.py", "exec"), _ttc_ns)
        _ttc_signal.setitimer(_ttc_signal.ITIMER_REAL, 0)
    _ttc_f = _ttc_ns[_TTC_NAME]
except BaseException as _ttc_error:
    _ttc_signal.setitimer(_ttc_signal.ITIMER_REAL, 0)
    for _ttc_i in range(len(_TTC_CASES)):
        _ttc_emit(_ttc_i, "error:" + type(_ttc_error).__name__, False if _TTC_CASES[_ttc_i][2] else None)
    raise SystemExit(0)
for _ttc_i, (_ttc_call, _ttc_expected, _ttc_has) in enumerate(_TTC_CASES):
    try:
        with _ttc_contextlib.redirect_stdout(_ttc_io.StringIO()):
            _ttc_signal.setitimer(_ttc_signal.ITIMER_REAL, _TTC_LIMIT)
            _ttc_result = _ttc_call(_ttc_f)
            _ttc_signal.setitimer(_ttc_signal.ITIMER_REAL, 0)
    except _TtcTimeout:
        _ttc_emit(_ttc_i, "timeout", False if _ttc_has else None)
        continue
    except BaseException as _ttc_error:
        _ttc_signal.setitimer(_ttc_signal.ITIMER_REAL, 0)
        _ttc_emit(_ttc_i, "raise:" + type(_ttc_error).__name__, False if _ttc_has else None)
        continue
    try:
        _ttc_text = _ttc_canon(_ttc_result)
        _ttc_passed = None
        if _ttc_has:
            _ttc_passed = _ttc_text == _ttc_canon(_ttc_expected) or bool(_ttc_result == _ttc_expected)
    except BaseException as _ttc_error:
        _ttc_text, _ttc_passed = "raise:" + type(_ttc_error).__name__, False if _ttc_has else None
    _ttc_emit(_ttc_i, _ttc_short(_ttc_text), _ttc_passed)
"""


def harness(code: str, name: str, tests: Sequence[Case], *, imports: str = "", limit_s: float = 1.0) -> str:
    """The one program the sandbox runs for a candidate: define it (its ``__main__`` block not
    run, its prints swallowed), then call ``name`` on every input, each under ``limit_s``.
    Inputs are literals (``parse_tests``), rebuilt fresh for every call, so a candidate that
    mutates its argument cannot change another input."""
    cases = ",\n".join(
        f"    (lambda _ttc_f: _ttc_f({t.args}), {t.expected if t.expected is not None else 'None'}, "
        f"{t.expected is not None})"
        for t in tests
    )
    source = f"{imports}\n{code}" if imports and "__future__" not in code else code
    return (
        f"_TTC_MARK = {MARK!r}\n_TTC_SOURCE = {source!r}\n_TTC_NAME = {name!r}\n_TTC_LIMIT = {limit_s!r}\n"
        f"_TTC_CASES = [\n{cases}\n]\n{_HARNESS}"
    )


@dataclass(frozen=True)
class Runnable:
    """A candidate ready for the sandbox: the harness program, the run's wall limit, and its
    code's length (the ranking's tie-break: shorter first)."""

    program: str
    wall_seconds: float
    length: int


def runnable(text: str, entry: str | None, tests: Sequence[Case], *, imports: str = "", input_timeout_s: float,
             timeout_s: float) -> Runnable | None:  # fmt: skip
    """The run of one candidate's text on ``tests`` (one sandbox execution, every input under
    ``input_timeout_s``, the whole within ``timeout_s``); None when it has no function to call
    (it abstains without a run). The served strategy and the calibration pools both run
    candidates through this, so a pool's behaviour is what serving would observe."""
    source = candidate_source(text)
    name = function_to_call(source, entry) if source is not None else None
    if source is None or name is None:
        return None
    wall = min(timeout_s, 2.0 + input_timeout_s * (len(tests) + 2))
    program = harness(source, name, tests, imports=imports, limit_s=input_timeout_s)
    return Runnable(program, wall, len(source))


def parse_run(stdout: str, count: int) -> Behaviour:
    """The behaviour a harness printed; inputs it never reached (the run was killed) are ``missing``."""
    results = ["missing"] * count
    passed: list[bool | None] = [None] * count
    for line in stdout.splitlines():
        if not line.startswith(MARK):
            continue
        try:
            index, result, verdict = json.loads(line[len(MARK) :])
        except (ValueError, TypeError):
            continue
        if isinstance(index, int) and 0 <= index < count and isinstance(result, str):
            results[index] = result
            passed[index] = verdict if isinstance(verdict, bool) else None
    return Behaviour(tuple(results), tuple(passed))
