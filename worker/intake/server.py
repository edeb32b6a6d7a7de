"""``vigil intake``'s HTTP server (aiohttp): OTLP/HTTP traces and vigil's own turn batches, into Redis.

Routes:

- ``POST /v1/traces``: an OTLP ``ExportTraceServiceRequest``, ``application/x-protobuf`` or ``application/json``,
  optionally gzip-compressed. 200 with ``partial_success`` naming the spans it rejected and why; 400 for a body it
  cannot decode; 413 above ``VIGIL_INTAKE_MAX_BYTES`` (decompressed), or when the message it would publish is over
  ``VIGIL_MAX_MESSAGE_BYTES`` (the workers' budget, and the former's default); 415 for another content type; 503 with
  ``Retry-After`` when Redis does not take the spans. A 200 means every span not named as rejected is in Redis.
- ``POST /v1/logs``: an OTLP ``ExportLogsServiceRequest``, with the same encodings and answers; the GenAI events
  among its log records (message content, as current instrumentations may send it) are kept with their span's trace
  for assembly, the other log records are dropped; a GenAI event with no trace or span id attaches to no span: it
  is accepted, not kept, and counted (``unattached`` in the request's line, and a line at most every ten minutes).
- ``POST /v1/turns``: a JSON list of turns (what ``producers.Monitor`` ships with ``VIGIL_INTAKE_URL``), published
  as one ``vigil.ingest`` task; the worker validates each turn and dead-letters the bad ones, as on the Redis path.
- ``GET /healthz``: 200.

With ingest keys configured (the config's ``projects:``, and ``VIGIL_INTAKE_TOKEN``, the ``default`` project's key:
``vigil.worker.serving.keys``), the POST routes need ``Authorization: Bearer <key>`` (401 otherwise), and everything a
request carries is its key's project's: each ``/v1/turns`` turn's ``project`` and each span's ``vigil.project`` are
set to it, whatever the body said. The key and the declared length are checked from the headers before a byte of the
body is read; the body is read and
inflated within ``VIGIL_INTAKE_MAX_BYTES`` as it arrives (``worker.serving``), an unauthenticated body is never read
(its connection is closed; an authenticated one over the budget is drained within a bound so the sender reads the
413, ``serving.aio.too_large``), and ``/v1/turns`` takes at most ``VIGIL_INTAKE_MAX_TURNS`` turns per request (413 over it:
the SDK sends it again in halves). ``run`` serves the app with at most ``VIGIL_INTAKE_MAX_CONNECTIONS`` connections.
The server keeps no state between requests but what one log line needs (``_say_unread``: which services of a project
sent spans a convention reads, bounded): run as many as needed behind a load balancer. A service whose spans carry
attributes and none a convention reads (an unknown framework's own, an app sending every trace) is named in a line
at most every ten minutes, with its attribute families: those spans are accepted and make no turn.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import structlog
from aiohttp import web
from aiohttp.web_protocol import RequestPayloadError
from vigil.schemas.broker import INGEST_TASK, SPANS_TASK, MessageTooLarge
from vigil.schemas.feedback import is_feedback
from vigil.worker.intake.otlp import (
    Decoded,
    UndecodableBody,
    decode_logs,
    decode_traces,
    encode_error,
    encode_logs_response,
    encode_response,
)
from vigil.worker.intake.publish import BROKER_ERRORS, Publisher
from vigil.worker.intake.settings import IntakeSettings
from vigil.worker.logs import Every
from vigil.worker.pipeline.broker_watch import RETRY_INTERVAL_S
from vigil.worker.serving import (
    BodyTooLarge,
    UnreadableBody,
    UnsupportedEncoding,
)
from vigil.worker.serving.aio import read_body, refusal, too_large
from vigil.worker.serving.keys import KeyRing
from vigil.worker.settings import get_settings

__all__ = ["make_app", "run"]

log = structlog.get_logger("vigil.intake")

_PROTOBUF, _JSON = "application/x-protobuf", "application/json"
# google.rpc.Code values for the Status body of a failed request
_INVALID_ARGUMENT, _UNAUTHENTICATED, _UNAVAILABLE, _RESOURCE_EXHAUSTED = 3, 16, 14, 8

_refusal_line = Every(RETRY_INTERVAL_S)
_UNREAD_EVERY_S = 600
_MAX_SERVICES = 10_000  # services remembered for the line on unread spans (beyond: no new line until a restart)
_reading: set[tuple[str, str]] = set()  # (project, service) that sent a span a convention reads, in this life
_unread_lines: dict[tuple[str, str], Every] = {}
_budget_line = Every(RETRY_INTERVAL_S)
_unattached_line = Every(_UNREAD_EVERY_S)
_UNATTACHED = "vigil.unattached"
_ACCEPTED, _REJECTED, _BYTES = "vigil.accepted", "vigil.rejected", "vigil.bytes"  # per request, for its log line
_PUBLISHER = web.AppKey("publisher", Publisher)
_SETTINGS = web.AppKey("settings", IntakeSettings)
_POOL = web.AppKey("pool", ThreadPoolExecutor)
_KEYS = web.AppKey("keys", KeyRing)
_PROJECT = "vigil.project"  # per request: its key's project (None: no keys configured, the body says)


def make_app(redis_url: str, settings: IntakeSettings, *, keys: KeyRing | None = None, publish_threads: int = 8,
             max_message_bytes: int | None = None) -> web.Application:
    """The intake's app; ``keys``: the ingest keys by project (default: ``VIGIL_INTAKE_TOKEN`` alone)."""
    middlewares = [_log_request, _errors, _auth] if settings.log_requests else [_errors, _auth]
    app = web.Application(client_max_size=settings.max_bytes, middlewares=middlewares)
    app[_SETTINGS] = settings
    app[_KEYS] = keys if keys is not None else KeyRing.of(
        settings.token.get_secret_value() if settings.token is not None else None, None)
    app[_PUBLISHER] = Publisher(redis_url, socket_timeout=settings.publish_timeout_s,
                                max_message_bytes=max_message_bytes or get_settings().max_message_bytes)
    app[_POOL] = ThreadPoolExecutor(publish_threads, thread_name_prefix="vigil-intake-publish")
    app.router.add_post("/v1/traces", traces)
    app.router.add_post("/v1/logs", logs)
    app.router.add_post("/v1/turns", turns)
    app.router.add_get("/healthz", healthz)
    app.on_cleanup.append(_close)
    return app


async def _close(app: web.Application) -> None:
    app[_POOL].shutdown(wait=True)
    app[_PUBLISHER].close()


def _is_json(request: web.Request) -> bool:
    return request.content_type == _JSON


def _error(status: int, code: int, message: str, request: web.Request, **headers: str) -> web.Response:
    json_body = _is_json(request) or request.path == "/v1/turns"
    return web.Response(status=status, body=encode_error(code, message, json_body=json_body),
                        content_type=_JSON if json_body else _PROTOBUF, headers=headers)


@web.middleware
async def _log_request(request: web.Request, handler) -> web.StreamResponse:
    """One info line per request (``VIGIL_INTAKE_LOG_REQUESTS=false`` or ``--no-log-requests``: none): so "did my
    exporter reach vigil?" has an answer."""
    response = await handler(request)
    if request.path != "/healthz":
        log.info("request", method=request.method, path=request.path, status=response.status,
                 accepted=request.get(_ACCEPTED), rejected=request.get(_REJECTED),
                 **({"unattached": request[_UNATTACHED]} if request.get(_UNATTACHED) else {}),
                 bytes=request.get(_BYTES, request.content_length))
    return response


@web.middleware
async def _errors(request: web.Request, handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except BodyTooLarge as exc:  # its connection is closed: the rest is never read
        log.warning("request too large", path=request.path, error=str(exc))
        return await too_large(request, _error(413, _RESOURCE_EXHAUSTED, str(exc), request),
                               request.app[_SETTINGS].max_bytes)
    except UnsupportedEncoding as exc:
        return refusal(_error(415, _INVALID_ARGUMENT, str(exc), request))
    except (UnreadableBody, RequestPayloadError) as exc:  # a body that could not be read, or not inflated
        log.warning("unreadable request body", path=request.path, error=str(exc))
        return refusal(_error(400, _INVALID_ARGUMENT, "unreadable body: " + " ".join(str(exc).split()), request))


@web.middleware
async def _auth(request: web.Request, handler) -> web.StreamResponse:
    """The bearer key, from the headers alone: a refused request's body is never read (nor inflated), and its
    connection is closed; an accepted one is its key's project's."""
    keys = request.app[_KEYS]
    request[_PROJECT] = None
    if keys.required and request.method == "POST":
        request[_PROJECT] = keys.project(request.headers.get("Authorization", ""))
        if request[_PROJECT] is None:
            return refusal(_error(401, _UNAUTHENTICATED, "missing, unknown or expired bearer key", request,
                                  **{"WWW-Authenticate": "Bearer"}))
    return await handler(request)


def _sender(request: web.Request) -> dict[str, str]:
    """Who sent a request (its address, and its key's project: what the workers set on its spans)."""
    sender = {"address": str(request.remote or "unknown")}
    if request.get(_PROJECT):
        sender["project"] = request[_PROJECT]
    return sender


async def _publish(request: web.Request, task: str, payload: list, what: str) -> web.Response | None:
    """Hand ``payload`` to Redis; None when it was taken, else the 503 to answer."""
    app = request.app
    try:
        await asyncio.get_running_loop().run_in_executor(app[_POOL], app[_PUBLISHER].send, task, payload, what,
                                                         _sender(request))
    except MessageTooLarge as exc:  # the workers would dead-letter it unread: the sender must send less at once
        log.warning("request over the message budget; answered 413", path=request.path, items=len(payload),
                    error=str(exc))
        return _error(413, _RESOURCE_EXHAUSTED, f"{len(payload)} {what} in one message: {exc}; send fewer at once",
                      request)
    except BROKER_ERRORS as exc:
        retry_after = app[_SETTINGS].retry_after_s
        if _refusal_line():  # a line per interval while Redis is down, not one per request
            log.error("redis refused the request; answered 503", path=request.path, items=len(payload),
                      error=repr(exc), retry_after=retry_after)
        return _error(503, _UNAVAILABLE, f"cannot store the {what} now ({type(exc).__name__}); retry later",
                      request, **{"Retry-After": str(retry_after)})
    return None


async def _over_pending(request: web.Request) -> web.Response | None:
    """429 with Retry-After, counted, while ``VIGIL_INTAKE_MAX_OPEN_TRACES`` traces, or
    ``VIGIL_INTAKE_MAX_PENDING_BYTES`` bytes of span records, wait to settle: a sender that opens traces faster than
    they settle fills Redis (one-span traces cost ~13x their bytes there) and, under ``noeviction``, every turn behind
    it would be refused."""
    app, settings = request.app, request.app[_SETTINGS]
    if not settings.max_open_traces and not settings.max_pending_bytes:
        return None
    loop = asyncio.get_running_loop()
    try:
        opened, held = await loop.run_in_executor(app[_POOL], app[_PUBLISHER].pending)
        if settings.max_open_traces and opened >= settings.max_open_traces:
            budget, message = "open_traces", (f"{opened} traces are waiting to settle, at VIGIL_INTAKE_MAX_OPEN_TRACES "
                                              f"({settings.max_open_traces})")
        elif settings.max_pending_bytes and held >= settings.max_pending_bytes:
            budget, message = "pending_bytes", (f"{held} bytes of spans are waiting to settle, at "
                                                f"VIGIL_INTAKE_MAX_PENDING_BYTES ({settings.max_pending_bytes})")
        else:
            return None
        await loop.run_in_executor(app[_POOL], app[_PUBLISHER].count_refusal, budget)
    except BROKER_ERRORS:
        return None  # the publish that follows answers 503 for an unreachable Redis
    if _budget_line():
        log.warning("too many spans waiting to settle; answered 429", budget=budget, open_traces=opened,
                    pending_bytes=held, retry_after=settings.retry_after_s)
    return _error(429, _RESOURCE_EXHAUSTED, f"{message}; retry later", request,
                  **{"Retry-After": str(settings.retry_after_s)})


async def _otlp(request: web.Request, decode, encode, what: str) -> web.Response:
    """One OTLP/HTTP export request: decode (400 when it cannot be), publish what is kept, answer."""
    if request.content_type not in (_PROTOBUF, _JSON):
        return _error(415, _INVALID_ARGUMENT, f"content type {request.content_type!r}: send {_PROTOBUF} or {_JSON}",
                      request)
    json_body = _is_json(request)
    body = await read_body(request, request.app[_SETTINGS].max_bytes)
    request[_BYTES] = len(body)
    try:
        decoded = decode(body, json_body=json_body)
    except RecursionError:  # JSON nested deeper than the parser goes
        return _error(400, _INVALID_ARGUMENT, "body nested too deeply", request)
    except UndecodableBody as exc:
        log.warning("undecodable OTLP body", path=request.path, error=str(exc))
        return _error(400, _INVALID_ARGUMENT, str(exc), request)
    request[_ACCEPTED], request[_REJECTED] = len(decoded.spans), decoded.rejected
    if decoded.unattached:
        request[_UNATTACHED] = decoded.unattached
        if _unattached_line():
            log.warning("GenAI log events with no trace or span id: accepted, attached to no span, not kept (the "
                        "spans' own attributes must state the messages)", unattached=decoded.unattached,
                        services=", ".join(sorted(s or "(none)" for s in decoded.unattached_from)))
    if decoded.spans and (full := await _over_pending(request)) is not None:
        return full
    if decoded.spans:
        refused = await _publish(request, SPANS_TASK, decoded.spans, what)
        if refused is not None:
            return refused
    if decoded.unread or decoded.read:
        _say_unread(request.get(_PROJECT) or "", decoded)
    if decoded.rejected:
        log.warning(f"{what} rejected", rejected=decoded.rejected, reasons=decoded.error_message[:1000])
    return web.Response(body=encode(decoded, json_body=json_body), content_type=_JSON if json_body else _PROTOBUF)


def _say_unread(project: str, decoded: Decoded) -> None:
    """A line, per service (of the key's project) at most every ten minutes, while a service has sent spans and none
    in a convention vigil reads: they are accepted and kept as bare links, and make no turn (an unknown framework's
    own spans, or an app sending every trace). Once any of its spans is read (its GenAI spans may travel in other
    requests), never again."""
    if len(_reading) < _MAX_SERVICES:
        _reading.update((project, service) for service in decoded.read)
    for service, unread in decoded.unread.items():
        key = (project, service)
        if key in _reading or (key not in _unread_lines and len(_unread_lines) >= _MAX_SERVICES):
            continue
        if _unread_lines.setdefault(key, Every(_UNREAD_EVERY_S))():
            log.warning("spans in no convention vigil reads: they make no turn", service=service or "(none)",
                        project=project or None, spans=unread.spans,
                        attributes=", ".join(f"{f}.*" for f in sorted(unread.families)[:8]),
                        see="README.md#instrumenting-an-agent")


async def traces(request: web.Request) -> web.Response:
    return await _otlp(request, decode_traces, encode_response, "spans")


async def logs(request: web.Request) -> web.Response:
    return await _otlp(request, decode_logs, encode_logs_response, "GenAI log events")


async def turns(request: web.Request) -> web.Response:
    if request.content_type != _JSON:
        return _error(415, _INVALID_ARGUMENT, f"content type {request.content_type!r}: send {_JSON}", request)
    settings = request.app[_SETTINGS]
    body = await read_body(request, settings.max_bytes)  # over the budget: 413 (the SDK sends it again in halves)
    try:
        batch = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        return _error(400, _INVALID_ARGUMENT, f"body is not JSON: {exc}", request)
    except RecursionError:
        return _error(400, _INVALID_ARGUMENT, "body is not JSON: nested too deeply", request)
    if not isinstance(batch, list) or not all(isinstance(turn, dict) for turn in batch):
        return _error(400, _INVALID_ARGUMENT, "body must be a JSON list of turn objects", request)
    if len(batch) > settings.max_turns:  # what a request costs the workers grows with its items, not its bytes
        log.warning("too many turns in one request; answered 413", items=len(batch), limit=settings.max_turns)
        return _error(413, _RESOURCE_EXHAUSTED, f"{len(batch)} turns in one request, over VIGIL_INTAKE_MAX_TURNS "
                      f"({settings.max_turns}); send fewer at once", request)
    request[_ACCEPTED] = len(batch)
    if request.get(_PROJECT):  # the key's project, never the one a turn claims
        batch = [_owned(item, request[_PROJECT]) for item in batch]
    if batch:
        refused = await _publish(request, INGEST_TASK, batch, "turns")
        if refused is not None:
            return refused
    return web.json_response({"accepted": len(batch)})


def _owned(item: dict, project: str) -> dict:
    """A ``/v1/turns`` item as its key's project's: a turn's ``project``, or a feedback item's."""
    if not is_feedback(item):
        return {**item, "project": project}
    return {"feedback": {**item["feedback"], "project": project}} if isinstance(item["feedback"], dict) else item


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def run(app: web.Application, host: str, port: int) -> None:
    """Serve ``app`` (``make_app``) until SIGINT or SIGTERM, at most ``VIGIL_INTAKE_MAX_CONNECTIONS`` connections."""
    from vigil.worker.serving.aio import run as serve

    settings = app[_SETTINGS]
    serve(app, host, port, max_connections=settings.max_connections,
          started=lambda url: log.info("intake listening", url=url, max_connections=settings.max_connections,
                                       max_bytes=settings.max_bytes, max_turns=settings.max_turns,
                                       projects=app[_KEYS].projects or None))
