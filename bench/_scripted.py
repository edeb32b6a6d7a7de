"""The scripted judge server in a child process, for the benchmarks that count this process's CPU as vigil's.

    with scripted_judge({"answer_relevancy_reason": {"reason": "..."}}) as base_url:
        judge = LLMJudge(JudgeConfig(name="bench", base_url=base_url, model="m"))

The child runs ``tests/judge_server.py``'s ``ScriptedJudge``, the one stand-in the tests allow. It answers each
``json_schema`` request with the reply given for its schema name (the step, e.g. ``answer_relevancy_analyze``; 400
for any other), reports 400 prompt and 40 completion tokens, keeps no history (thousands of requests), and stops
when this process closes its stdin. Its CPU is not this process's: ``time.process_time`` here is the client side's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["scripted_judge"]

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def scripted_judge(replies: dict[str, Any]) -> Iterator[str]:
    """The base URL of a scripted judge in a child process answering ``replies`` (schema name -> JSON reply)."""
    child = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             cwd=ROOT)
    try:
        child.stdin.write(json.dumps(replies) + "\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
        base_url = child.stdout.readline().strip()  # type: ignore[union-attr]
        if not base_url:
            raise SystemExit("the scripted judge server did not start")
        yield base_url
    finally:
        child.stdin.close()  # type: ignore[union-attr]
        child.wait(30)


class _Forgetful(list):
    def append(self, item: Any) -> None:
        pass


def _serve() -> None:
    sys.path.insert(0, str(ROOT))
    from tests.judge_server import Reply, ScriptedJudge

    replies = json.loads(sys.stdin.readline())

    def reply(body: dict[str, Any]) -> Reply:
        name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name")
        if name not in replies:
            return Reply.error(400, f"this server answers json_schema requests for {sorted(replies)}, not {name!r}")
        return Reply.json(replies[name], prompt_tokens=400, completion_tokens=40)

    with ScriptedJudge(reply) as server:
        server.requests = _Forgetful()
        print(server.base_url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    _serve()
