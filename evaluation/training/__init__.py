"""Training data from search: the candidates the pools drew (and the served traces whose owners
opted in) exported as fine-tuning rows, preference pairs and outcome labels, with a manifest.

In the order the data flows: :mod:`~.outcomes` labels a candidate from independent checks only;
:mod:`~.withheld` says which questions no export may contain (development and sealed splits);
:mod:`~.trajectories` and :mod:`~.served` read pools and traces into trajectories; :mod:`~.export`
turns them into the rows of :mod:`~.formats`, whose pydantic models also give the JSON schemas.
The command is ``python -m calibration export``; what is built and what is not: docs/training.md.
"""
