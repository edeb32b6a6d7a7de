"""vigil's worker side: the Celery app and tasks, sampling, scorers, the judge client, sinks, alerts, the CLI."""
