"""What every scorer's prompts share: how a judge request is laid out, and the reason step's answer.

A request has two messages. The **system message** is static, the same for every call of a step: the judge's task
and the seed's criteria, said once (the JSON schema is added by the judge client, also static). So it is a prefix
that OpenAI-style automatic prompt caching can serve. The **user message** is what depends on the trace: the fence
rules with this prompt's nonce (``vigil.worker.judge.fence.DATA_RULES``, said once), then the fenced data, then any
computed figures. Nothing trace-dependent comes before static text.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field
from vigil.worker.judge.fence import DATA_RULES, fence, nonce_for

__all__ = ["Reason", "data_header", "data_message", "fenced_json", "nonce_for"]


class Reason(BaseModel):
    reason: str = Field(description="In the language of the question.")


def data_header(nonce: str) -> str:
    """The rules for this prompt's fences, stated before them."""
    return DATA_RULES.format(nonce=nonce)


def data_message(nonce: str, *parts: str) -> str:
    """The user message: the fence rules, then ``parts`` (fenced data and computed figures), in order."""
    return "\n\n".join((data_header(nonce), *parts))


def fenced_json(value: Any, *, nonce: str, label: str) -> str:
    """``value`` as JSON, one item per line (so no item can pose as two), inside a fence."""
    return fence(json.dumps(value, ensure_ascii=False, indent=0), nonce=nonce, label=label)
