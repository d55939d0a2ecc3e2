"""The search library: budgeted, traced test-time strategies over a policy and a verifier.

Pure of transport: it imports no gRPC, Celery or Redis (``tests/unit/test_import_rules.py``).
The orchestrator's worker process (``services/orchestrator/``) adapts gRPC to its ``Policy`` and
``Verifier`` protocols and runs ``run.run_search`` for each job off the queue.
"""
