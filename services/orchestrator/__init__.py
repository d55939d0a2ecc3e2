"""The orchestrator's worker process: Celery tasks that run searches (``services/search/``)
against the policy, verifier and sandbox services over gRPC, and the ``Orchestrator`` gRPC service."""
