"""Stage 5, reports on problems the fit never saw: the fitted ladder scored on the development
split's pools and through the gateway (the plan, outcomes and report of a routed run), the
Must-show checks decided on either, leave one family out, the sealed test split's run and
report, the simulator check of priced figures against live ones, the escalation report of the
small model, the large one and the cascade, and the learned routers on the development pools.

The development split was looked at while the ladder, its checkers and its prompts were built,
so its figures are development figures, not held-out ones; leave-one-family-out and the sealed
split are the held-out measurements."""
