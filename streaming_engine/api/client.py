"""The CLI's side of the REST API (``run --async``, ``list``): stdlib HTTP only.

No server code is imported here: a client needs neither FastAPI nor Spark.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from streaming_engine.errors import EngineError

DEFAULT_SERVER = "http://127.0.0.1:8080"
SERVER_ENV = "STREAMING_ENGINE_SERVER"


def server_url(given: str | None) -> str:
    return (given or os.environ.get(SERVER_ENV) or DEFAULT_SERVER).rstrip("/")


@dataclass
class Answer:
    status: int
    body: Any


class Client:
    def __init__(self, server: str, token: str, ca_file: str | None = None, timeout: float = 60.0):
        self.server, self.token, self.timeout = server.rstrip("/"), token, timeout
        scheme = urllib.parse.urlsplit(self.server).scheme
        if scheme not in ("http", "https"):
            raise EngineError("API.NO_SERVER", {"server": self.server, "detail": "the URL must start with http:// or "
                                                "https://"})
        self.context = ssl.create_default_context(cafile=ca_file) if scheme == "https" else None

    def request(self, method: str, path: str, body: bytes | None = None, content_type: str | None = None,
                query: dict[str, str] | None = None) -> Answer:
        url = self.server + path + (("?" + urllib.parse.urlencode(query)) if query else "")
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(url, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.context) as resp:
                return Answer(resp.status, _decode(resp.read()))
        except urllib.error.HTTPError as e:
            return Answer(e.code, _decode(e.read()))
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise EngineError("API.NO_SERVER", {"server": self.server, "detail": str(reason)}) from None

    def submit(self, text: str, fmt: str, job_name: str | None = None, restore: str | None = None) -> Answer:
        query: dict[str, str] = {"format": fmt}
        if job_name:
            query["jobName"] = job_name
        if restore:
            query.update({"jobId": restore, "isStartWithSavePoint": "true"})
        ctype = {"json": "application/json", "hocon": "text/plain", "yaml": "application/yaml"}[fmt]
        return self.request("POST", "/submit-job", text.encode("utf-8"), f"{ctype}; charset=utf-8", query)


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {"status": "fail", "message": raw.decode("utf-8", "replace")[:2000]}
