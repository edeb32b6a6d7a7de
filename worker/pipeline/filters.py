"""Which turns a monitor looks at: agent, environment, project, tags (all required) and metadata (all equal)."""

from __future__ import annotations

from vigil.schemas import MonitorFilter, Turn

__all__ = ["matches"]


def matches(turn: Turn, rule: MonitorFilter) -> bool:
    if rule.agents and turn.agent not in rule.agents:
        return False
    if rule.environments and turn.environment not in rule.environments:
        return False
    if rule.projects and turn.project not in rule.projects:
        return False
    if rule.tags and not set(rule.tags) <= set(turn.tags):
        return False
    return all(turn.metadata.get(key) == value for key, value in rule.metadata.items())
