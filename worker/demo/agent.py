"""The demo's agent under test for the multi-turn monitor: an OpenAI-compatible chat endpoint that answers each
question with the best-matching passage of the bundled knowledge base (BM25). It stands in for a live support bot,
so ``vigil demo`` can run the paper's T1–T7 loop end to end without a network or a model.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from vigil.worker.retrieval import BM25Retriever

__all__ = ["KnowledgeBaseAgent"]

MODEL = "kb-agent"


class KnowledgeBaseAgent:
    def __init__(self, knowledge_base: str) -> None:
        self.retriever = BM25Retriever(knowledge_base)
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def answer(self, question: str) -> str:
        found = self.retriever.search(question, 1)
        return found[0].text if found else "I could not find that in our help centre."

    def start(self) -> KnowledgeBaseAgent:
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                question = next((m["content"] for m in reversed(body["messages"]) if m["role"] == "user"), "")
                reply = json.dumps({
                    "id": "kb", "object": "chat.completion", "created": int(time.time()), "model": MODEL,
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": agent.answer(question)}}],
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, name="kb-agent", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
