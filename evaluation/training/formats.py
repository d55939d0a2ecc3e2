"""The four files an export writes, as pydantic models: rows are built as these models and
dumped from them, and the JSON schemas a consumer validates against are generated from the same
models (:func:`schemas`), so the files and their schemas cannot drift apart.

- ``sft.jsonl``: :class:`SftRow`, the OpenAI fine-tuning chat format (``messages``), one per prompt;
- ``preferences.jsonl``: :class:`PreferenceRow`, a conversational preference pair (``prompt``,
  ``chosen``, ``rejected``, as TRL's DPO trainer reads them) with both candidates' ids;
- ``outcomes.jsonl``: :class:`OutcomeRow`, one verified outcome label per candidate;
- ``manifest.json``: :class:`Manifest`, what was exported, what was left out and why, and
  where it came from.

The process labels (``python -m calibration process``) write two more files into a folder of
their own (:data:`PROCESS_FILES`): ``process.jsonl``, :class:`ProcessRow`, a chain of thought
with a label per step, and ``process_manifest.json``, :class:`ProcessManifest`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant"]
Modality = Literal["cot", "program", "code"]
FailureKind = Literal["wrong_value", "wrong_form", "literal_guess", "program_error", "timeout", "cut"]


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ChatMessage(_Row):
    role: Role
    content: str


class SftRow(_Row):
    """One prompt's best verified trajectory; ``messages`` ends with the assistant turn."""

    messages: list[ChatMessage] = Field(min_length=2)
    prompt_id: str
    candidate_id: str
    source: str = Field(description="pool:<model> or served:<API key name>")
    family: str
    task_kind: str
    modality: Modality
    completion_tokens: int = Field(ge=0)


class PreferenceRow(_Row):
    """A verified-right and a verified-wrong answer to the same prompt."""

    prompt: list[ChatMessage] = Field(min_length=1)
    chosen: list[ChatMessage] = Field(min_length=1, max_length=1)
    rejected: list[ChatMessage] = Field(min_length=1, max_length=1)
    prompt_id: str
    chosen_id: str
    rejected_id: str
    chosen_modality: Modality
    rejected_modality: Modality
    rejected_failure: FailureKind
    family: str
    task_kind: str


class Candidate(_Row):
    """Which candidate a trajectory or a row speaks of: its prompt, its own id, where it came
    from (``pool:<model>`` or ``served:<API key name>``), its family, task kind and modality."""

    prompt_id: str
    candidate_id: str
    source: str
    family: str
    task_kind: str
    modality: Modality


class OutcomeRow(Candidate):
    """One candidate's outcome label. ``label`` is true only for a complete answer an independent
    check found right (and, for a program, one that computed it); ``correct`` is the checker's
    verdict alone; ``failure`` says why a false label is false."""

    label: bool
    correct: bool
    failure: FailureKind | None
    detail: str = Field(description="the failure's particulars: sandbox status, why a program is a guess")
    completion_tokens: int = Field(ge=0)


class PoolSource(_Row):
    """One pool folder as its chunk headers record it."""

    path: str
    chunks: int
    models: list[str]
    model_sha256: list[str]
    draw_seeds: list[int]
    data_seeds: list[int]
    drawn_by: list[str] = Field(description="git describe of the code that drew the chunks")


class Counts(_Row):
    """One file's rows counted; a preference pair counts under its rejected candidate's modality."""

    rows: int
    by_family: dict[str, int]
    by_task_kind: dict[str, int]
    by_modality: dict[str, int]
    by_failure: dict[str, int] = Field(description="outcomes: labels false per failure; preferences: per rejected")


class Manifest(_Row):
    schema_version: Literal[1] = 1
    revision: str = Field(description="git describe of the code that exported")
    exported_at: str
    files: dict[str, Counts]
    left_out: dict[str, int] = Field(description="reason -> count (candidates, problems or traces, as named)")
    prompts: int
    pools: list[PoolSource]
    served_keys: list[str]
    rules: list[str]


class ProcessStep(_Row):
    """One step of a chain of thought, labelled by completions drawn from its prefix (the
    completion up to and including the step): ``rollouts`` of them were graded (infrastructure
    errors are not, and are counted in ``errors``), ``right`` reached a verified-right complete
    answer, ``cut`` hit ``max_tokens``."""

    index: int = Field(ge=0, description="the step's position among all the chain's steps")
    text: str
    prefix_chars: int = Field(ge=0, description="the prefix is the completion's first prefix_chars characters")
    rollouts: int = Field(ge=1)
    right: int = Field(ge=0)
    cut: int = Field(ge=0)
    errors: int = Field(ge=0)
    value: float = Field(ge=0.0, le=1.0, description="right / rollouts: the soft estimate of the step's value")
    reaches: bool = Field(description="right > 0: the hard estimate (the step can still reach the answer)")
    generated_tokens: int = Field(ge=0)


class ProcessRow(Candidate):
    """A chain of thought with process labels: its prompt, the completion, its own outcome label
    (and why a false one is false), and its chosen steps, each with its label."""

    prompt: list[ChatMessage] = Field(min_length=1)
    completion: str
    label: bool
    failure: FailureKind | None
    steps_total: int = Field(ge=2, description="how many steps the completion splits into")
    steps: list[ProcessStep] = Field(min_length=1)
    steps_left_out: int = Field(ge=0, description="chosen steps whose every rollout failed for infrastructure")
    generated_tokens: int = Field(ge=0, description="tokens the rollouts of every chosen step generated")


class ProcessCounts(_Row):
    """The rows of ``process.jsonl`` counted; ``by_label`` is the candidates' own outcome label
    (``right``, ``wrong``), ``by_failure`` the wrong ones' failure kinds."""

    rows: int
    steps: int
    by_family: dict[str, int]
    by_task_kind: dict[str, int]
    by_label: dict[str, int]
    by_failure: dict[str, int]


class ProcessManifest(_Row):
    """What a process-label run wrote, from which pool and model, with which settings and code."""

    schema_version: Literal[1] = 1
    revision: str = Field(description="git describe of the code that wrote the files")
    written_at: str
    drawn_by: list[str] = Field(description="git describe of the code that drew the records' chunks")
    model: str
    model_sha256: str
    pool: PoolSource
    settings: dict[str, float | int | str]
    chunks: int
    files: dict[str, ProcessCounts]
    left_out: dict[str, int] = Field(description="reason -> count (problems, candidates, steps or records, as named)")
    mean_value: dict[str, float | None] = Field(description="candidate label -> mean value of its labelled steps")
    mean_value_by_position: dict[str, list[float | None]] = Field(
        description="candidate label -> mean value at its first, second, ... labelled step"
    )
    generated_tokens: int = Field(ge=0, description="every rollout's generated tokens, errors' included")
    prompt_tokens: int = Field(ge=0)
    rules: list[str]


#: file name -> the model of its rows (or of the whole file, for the manifest): the export's files
FILES: dict[str, type[BaseModel]] = {
    "sft.jsonl": SftRow,
    "preferences.jsonl": PreferenceRow,
    "outcomes.jsonl": OutcomeRow,
    "manifest.json": Manifest,
}
#: the files of a process-label run
PROCESS_FILES: dict[str, type[BaseModel]] = {
    "process.jsonl": ProcessRow,
    "process_manifest.json": ProcessManifest,
}


def schemas(files: Mapping[str, type[BaseModel]] = FILES) -> dict[str, dict[str, Any]]:
    """File name -> the JSON schema of one of its rows (of the whole file for a manifest), for the
    export's files or those given (:data:`PROCESS_FILES`)."""
    return {name: model.model_json_schema() for name, model in files.items()}
