"""A search's termination names are ``ttc.v1.Termination``'s: the search library's names, the
enum the worker sends and the name the gateway reports are one table, read from the proto."""

from __future__ import annotations

from typing import get_args

import pytest

from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs.termination import termination_name, termination_value
from services.search.strategies.results import Termination


def test_every_name_a_search_stops_with_is_an_enum_value_and_back() -> None:
    for name in get_args(Termination):
        assert termination_name(termination_value(name)) == name


def test_every_enum_value_but_unspecified_is_a_name_a_search_stops_with() -> None:
    named = {termination_value(name) for name in get_args(Termination)}
    assert named == set(orchestrator_pb2.Termination.values()) - {orchestrator_pb2.TERMINATION_UNSPECIFIED}


def test_names_read_the_enum() -> None:
    assert termination_value("solved") == orchestrator_pb2.TERMINATION_SOLVED
    assert termination_name(orchestrator_pb2.TERMINATION_COMPLETED) == "completed"


@pytest.mark.parametrize("value", [orchestrator_pb2.TERMINATION_UNSPECIFIED, 99])
def test_an_unset_or_unknown_value_is_unspecified(value: int) -> None:
    assert termination_name(value) == "unspecified"


def test_an_unknown_name_is_refused() -> None:
    with pytest.raises(ValueError):
        termination_value("exhausted")
