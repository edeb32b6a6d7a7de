"""vigil's worker side, one room per layer: pipeline, judge, scorers, retrieval, sinks, store, alerts, report, cli, demo."""
