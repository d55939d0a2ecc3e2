"""Search orchestrator: budgeted, traced test-time strategies over a policy and a verifier."""
