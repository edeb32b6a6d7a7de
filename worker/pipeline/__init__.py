"""The pipeline: the Celery app and its tasks (ingest, score, the alert check), what one worker process holds
(runtime), deterministic sampling, monitor filters, the judge event loop, and the backlog that says when it is done."""
