"""The job contract between the gateway (sender) and the orchestrator workers (runners).

Imported by both, importing neither: Redis keys and the event stream (``events``), the Celery
app factory (``celery_app``), the trace store (``trace_store``), typed job errors (``errors``),
the job record (``record``) and the structural validation of a job with the hook the gateway
validates through (``validation``). Nothing here imports a strategy, numpy or a service's servicer.
"""
