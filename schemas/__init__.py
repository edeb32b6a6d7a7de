"""The contracts every side of vigil shares: a turn, a score, the monitor config, the ClickHouse DDL.

Imports nothing of vigil's.
"""

from vigil.schemas.config import (
    AlertRule,
    JudgeConfig,
    MonitorConfig,
    MonitorFilter,
    VigilConfig,
    load_config,
)
from vigil.schemas.score import (
    NOT_APPLICABLE,
    JudgeCall,
    JudgeUsage,
    NotApplicable,
    Score,
    ScoreResult,
    ScoreStatus,
    StepResult,
    score_id,
)
from vigil.schemas.trace import (
    ORIGIN_HEADER,
    ContextDoc,
    Message,
    Origin,
    TokenUsage,
    ToolCall,
    Turn,
)

__all__ = [
    "NOT_APPLICABLE",
    "ORIGIN_HEADER",
    "AlertRule",
    "ContextDoc",
    "JudgeCall",
    "JudgeConfig",
    "JudgeUsage",
    "Message",
    "MonitorConfig",
    "MonitorFilter",
    "NotApplicable",
    "Origin",
    "Score",
    "ScoreResult",
    "ScoreStatus",
    "StepResult",
    "TokenUsage",
    "ToolCall",
    "Turn",
    "VigilConfig",
    "load_config",
    "score_id",
]
