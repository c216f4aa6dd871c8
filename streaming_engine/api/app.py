"""The ASGI app: SeaTunnel REST v2's paths on FastAPI, behind a token and a body limit.

Two plain ASGI layers wrap the FastAPI app, so nothing reaches a route (or
FastAPI's 404) without passing them:

- :class:`TokenGuard`: every HTTP request needs ``Authorization: Bearer
  <token>`` (401 otherwise, ``WWW-Authenticate: Bearer``); other scopes
  (websockets) are refused;
- :class:`BodyLimit`: a body over ``max_body`` bytes is answered 413 before it
  is read (by its Content-Length) or as soon as it grows past the limit.

Errors are JSON ``{"status": "fail", "message": ...}`` (SeaTunnel's shape)
with ``condition`` (the engine's error condition) and, for a job config,
``problems`` (each with file, line, block and key). Every JSON body and the
Prometheus text pass through :mod:`streaming_engine.redact` on the way out.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from streaming_engine import redact
from streaming_engine.api import auth
from streaming_engine.api.jobs import ApiError, JobService
from streaming_engine.errors import render

if TYPE_CHECKING:  # pragma: no cover
    from streaming_engine.metrics.prometheus import PrometheusMetrics

log = logging.getLogger("streaming_engine.api")

MAX_BODY = 1 << 20  # 1 MiB: a job config is a few KiB
Scope = dict[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]


def _redacted(value: Any) -> Any:
    """Every string of a JSON tree through redact_text, keys included."""
    if isinstance(value, str):
        return redact.redact_text(value)
    if isinstance(value, dict):
        return {redact.redact_text(str(k)): _redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(v) for v in value]
    return value


class RedactedJSON(JSONResponse):
    def render(self, content: Any) -> bytes:
        return json.dumps(_redacted(content), ensure_ascii=False, allow_nan=False, default=str,
                          separators=(",", ":")).encode("utf-8")


def fail(status: int, condition: str, params: dict[str, Any] | None = None, **extra: Any) -> RedactedJSON:
    body = {"status": "fail", "message": render(condition, params or {}), "condition": condition, **extra}
    return RedactedJSON(body, status_code=status)


# -- the two ASGI layers ----------------------------------------------------------------------
class TokenGuard:
    def __init__(self, app: ASGIApp, token: str):
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets here
            await send({"type": "websocket.close", "code": 1008})
            return
        header = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"authorization"), None)
        if not auth.matches(self.token, header):
            client = scope.get("client") or ("?", 0)
            log.warning("request refused: no valid token", extra={
                "client": f"{client[0]}:{client[1]}", "method": scope.get("method"), "path": scope.get("path"),
                "why": "no Authorization header" if header is None else "wrong token or scheme"})
            response = fail(401, "API.UNAUTHORIZED", {})
            response.headers["WWW-Authenticate"] = 'Bearer realm="streaming-engine"'
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


class BodyLimit:
    def __init__(self, app: ASGIApp, max_body: int):
        self.app, self.max_body = app, max_body

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = next((v for k, v in scope.get("headers", []) if k == b"content-length"), None)
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                await fail(400, "API.BAD_REQUEST", {"detail": "Content-Length is not a number"})(scope, receive, send)
                return
            if declared > self.max_body:
                await self._too_large(scope, receive, send, declared)
                return
        # read the body here (at most the limit), then hand it on: a chunked body over the limit is cut short
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                await self._too_large(scope, receive, send, None)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, receive: Any, send: Any, declared: int | None) -> None:
        log.warning("request refused: body too large", extra={"path": scope.get("path"), "declared": declared,
                                                              "limit": self.max_body})
        response = fail(413, "API.BODY_TOO_LARGE", {"limit": self.max_body,
                                                    "size": f"{declared} bytes" if declared is not None else
                                                    f"more than {self.max_body} bytes"})
        response.headers["Connection"] = "close"  # the rest of the body is not read
        await response(scope, receive, send)


# -- the routes ---------------------------------------------------------------------------------
def _flag(value: Any, name: str) -> bool:
    if value is None or value is False:
        return False
    if value is True:
        return True
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise ApiError(400, "API.BAD_PARAMETER", {"name": name, "detail": "must be true or false"})


def _job_id(value: Any, name: str = "jobId") -> str:
    text = str(value).strip() if value is not None and not isinstance(value, bool) else ""
    if not text.isdigit() or len(text) > 19:
        raise ApiError(400, "API.BAD_PARAMETER", {"name": name, "detail": "must be a job id (a decimal number)"})
    return str(int(text))


def _format(fmt: str | None, content_type: str | None) -> str:
    if fmt:
        fmt = fmt.strip().lower()
        if fmt not in ("json", "hocon", "yaml"):
            raise ApiError(400, "API.BAD_PARAMETER", {"name": "format", "detail": "must be json, hocon or yaml"})
        return fmt
    media = (content_type or "").split(";")[0].strip().lower()
    if media in ("text/plain", "application/hocon", "text/hocon"):
        return "hocon"
    if media in ("application/yaml", "application/x-yaml", "text/yaml"):
        return "yaml"
    return "json"  # SeaTunnel's default


def create_app(service: JobService, token: str, max_body: int = MAX_BODY,
               metrics: "PrometheusMetrics | None" = None, read_only: bool = False) -> ASGIApp:
    """``read_only``: the endpoints of one attached run (``run --api-port``):
    submit-job and stop-job answer 405 (stop that run with ``streaming-engine stop``)."""
    from streaming_engine import __version__ as engine_version

    api = FastAPI(title="streaming-engine REST API (SeaTunnel REST v2 paths)", version=engine_version,
                  docs_url=None, redoc_url=None, openapi_url="/openapi.json", default_response_class=RedactedJSON)

    @api.exception_handler(ApiError)
    async def _api_error(request: Request, e: ApiError) -> Response:
        extra = {"problems": [p.to_dict() for p in e.problems]} if e.problems else {}
        if e.status >= 500:
            log.error("request failed", extra={"path": request.url.path, "error": str(e)})
        return fail(e.status, e.condition, e.params, **extra)

    @api.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, e: StarletteHTTPException) -> Response:
        return RedactedJSON({"status": "fail", "message": str(e.detail)}, status_code=e.status_code)

    @api.exception_handler(RequestValidationError)
    async def _invalid(request: Request, e: RequestValidationError) -> Response:
        detail = "; ".join(f"{'.'.join(str(x) for x in err.get('loc', ()))}: {err.get('msg')}" for err in e.errors())
        return fail(400, "API.BAD_REQUEST", {"detail": detail})

    @api.exception_handler(Exception)
    async def _unexpected(request: Request, e: Exception) -> Response:
        log.error("request failed", extra={"path": request.url.path, "error": f"{type(e).__name__}: {e}"})
        return fail(500, "API.INTERNAL", {"detail": f"{type(e).__name__}"})

    @api.post("/submit-job")
    async def submit_job(request: Request, jobId: str | None = None, jobName: str | None = None,  # noqa: N803
                         isStartWithSavePoint: str | None = None, format: str | None = None) -> Any:  # noqa: A002,N803
        if read_only:
            raise ApiError(405, "API.READ_ONLY", {"what": "submit jobs", "instead": "start 'streaming-engine serve'"})
        raw = await request.body()
        if not raw.strip():
            raise ApiError(400, "API.BAD_REQUEST", {"detail": "Request body is empty: send the job config "
                                                    "(HOCON or JSON) as the body"})
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ApiError(400, "API.BAD_REQUEST", {"detail": f"the body is not UTF-8 (invalid byte at offset "
                                                    f"{e.start})"}) from None
        fmt = _format(format, request.headers.get("content-type"))
        s = await run_in_threadpool(service.submit, text, fmt, jobName, jobId if jobId not in (None, "") else None,
                                    _flag(isStartWithSavePoint, "isStartWithSavePoint"))
        out: dict[str, Any] = {"jobId": s.job_id, "jobName": s.master.name}
        if s.job.dag.warnings:
            out["warnings"] = [w.to_dict() for w in s.job.dag.warnings]
        return out

    @api.post("/stop-job")
    async def stop_job(request: Request) -> Any:
        if read_only:
            raise ApiError(405, "API.READ_ONLY", {"what": "stop jobs",
                                                  "instead": "use 'streaming-engine stop -c <job file> [--savepoint]'"})
        raw = await request.body()
        try:
            body = json.loads(raw.decode("utf-8")) if raw.strip() else None
        except (UnicodeDecodeError, ValueError) as e:
            raise ApiError(400, "API.BAD_REQUEST", {"detail": f"Invalid JSON format in request body: {e}"}) from None
        if not isinstance(body, dict) or "jobId" not in body:
            raise ApiError(400, "API.BAD_REQUEST", {"detail": 'the body must be a JSON object {"jobId": ..., '
                                                    '"isStopWithSavePoint": false}'})
        job_id = _job_id(body["jobId"])
        savepoint = _flag(body.get("isStopWithSavePoint"), "isStopWithSavePoint")
        await run_in_threadpool(service.stop, job_id, savepoint)
        return {"jobId": job_id}

    async def _info(jobId: str) -> Any:  # noqa: N803
        return await run_in_threadpool(service.info, _job_id(jobId))

    api.get("/job-info/{jobId}")(_info)
    api.get("/running-job/{jobId}", deprecated=True)(_info)  # SeaTunnel's older name

    @api.get("/running-jobs")
    async def running_jobs() -> Any:
        return await run_in_threadpool(service.running)

    @api.get("/finished-jobs")
    async def finished_jobs() -> Any:
        return await run_in_threadpool(service.finished, None)

    @api.get("/finished-jobs/{state}")
    async def finished_jobs_in(state: str) -> Any:
        return await run_in_threadpool(service.finished, state)

    @api.get("/overview")
    async def overview() -> Any:
        return await run_in_threadpool(service.overview)

    @api.get("/metrics")
    async def prometheus() -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        text = generate_latest(metrics.registry).decode("utf-8") if metrics is not None else ""
        return Response(redact.redact_text(text), media_type=CONTENT_TYPE_LATEST)

    return TokenGuard(BodyLimit(api, max_body), token)
