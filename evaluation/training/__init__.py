"""Training data from search: the candidates the pools drew (and the served traces whose owners
opted in) exported as fine-tuning rows, preference pairs and outcome labels, with a manifest.

In the order the data flows: :mod:`~.outcomes` labels a candidate from independent checks only;
:mod:`~.withheld` says which questions no export may contain (development and sealed splits);
:mod:`~.trajectories` and :mod:`~.served` read pools and traces into trajectories; :mod:`~.export`
turns them into the rows of :mod:`~.formats`, whose pydantic models also give the JSON schemas.

Then the model is fine-tuned on them: :mod:`~.sft_data` turns the fine-tuning rows into a
training set (refused whole if any row is withheld); :mod:`~.run_state` holds a run's settings
and folder; :mod:`~.finetune` trains LoRA on the CPU, resumable; :mod:`~.gguf_export` merges the
adapter and converts it to GGUF. The before/after evaluation: :mod:`~.eval_sets` (the development
and sealed problems and their checkers), :mod:`~.eval_draw` and :mod:`~.eval_run` (answers drawn
as resumable pools), :mod:`~.before_after` and :mod:`~.paired` (the comparison).

Process labels per step (Math-Shepherd): :mod:`~.process_choice` picks a verified-right and a verified-wrong chain of
thought per problem, :mod:`~.process_steps` cuts a chain into steps and prefixes,
:mod:`~.process_labels` labels each prefix by rollouts through the policy, :mod:`~.process_rows`
writes the rows and the manifest. The commands are ``python -m calibration export``,
``python -m calibration process`` and ``python -m calibration train``; docs/training.md.
"""
