"""Stage 5, held-out and test reports: the fitted ladder scored on held-out pools and through the
gateway (the plan, outcomes and report of a routed run), the Must-show checks decided on either,
the simulator check of priced figures against live ones, the escalation report of the small
model, the large one and the cascade, and the learned routers on held-out pools."""
