"""The configurations compared: OptiLLM approaches and our reasoning efforts, one list each.

An OptiLLM approach is chosen per request by ``extra_body={"optillm_approach": name}`` (the
proxy also reads a ``<name>-<model>`` prefix, but a model name with dashes such as
``qwen2.5-coder-0.5b`` reads more safely from the body). Its code-execution approach is the
``executecode`` plugin (``optillm/plugins/executecode_plugin.py``, ``SLUG = "executecode"``):
it runs the Python the model writes and feeds the output back for a final answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from loadtests.grid import EFFORTS

System = Literal["ttc", "optillm"]

# OptiLLM's approaches compared with our efforts; "executecode" is its code-execution plugin.
APPROACHES: tuple[str, ...] = ("self_consistency", "bon", "moa", "mcts", "plansearch", "executecode")


class UnknownConfig(ValueError):
    """An effort or approach name that is not compared; the message lists the known ones."""


@dataclass(frozen=True)
class Config:
    """One column of the table: our gateway at an effort, or OptiLLM with an approach."""

    system: System
    name: str

    @property
    def label(self) -> str:
        """``ttc:high`` or ``optillm:moa``: the key records and the summary use."""
        return f"{self.system}:{self.name}"

    @classmethod
    def parse(cls, label: str) -> Config:
        system, _, name = label.partition(":")
        if system == "ttc":
            return cls("ttc", _check(name, EFFORTS, "effort"))
        if system == "optillm":
            return cls("optillm", _check(name, APPROACHES, "OptiLLM approach"))
        raise UnknownConfig(f"unknown configuration {label!r}: expected ttc:<effort> or optillm:<approach>")


def _check(name: str, known: Sequence[str], what: str) -> str:
    if name not in known:
        raise UnknownConfig(f"unknown {what} {name!r}; known: {', '.join(known)}")
    return name


def split_names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def build_configs(efforts: str, approaches: str) -> list[Config]:
    """Our efforts first, then OptiLLM's approaches, each named once and validated.

    ``all`` stands for every effort (``none``..``xhigh``) or every approach of :data:`APPROACHES`."""
    effort_names = list(EFFORTS) if efforts.strip() == "all" else split_names(efforts)
    approach_names = list(APPROACHES) if approaches.strip() == "all" else split_names(approaches)
    configs = [Config.parse(f"ttc:{e}") for e in effort_names]
    configs += [Config.parse(f"optillm:{a}") for a in approach_names]
    labels = [c.label for c in configs]
    repeated = sorted({x for x in labels if labels.count(x) > 1})
    if repeated:
        raise UnknownConfig(f"configurations named twice: {', '.join(repeated)}")
    if not configs:
        raise UnknownConfig("no configuration to run: give --efforts and/or --approaches")
    return configs
