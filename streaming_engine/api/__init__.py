"""The REST API (``streaming-engine serve``): SeaTunnel's REST v2 paths and
fields over a long-lived driver that runs submitted jobs on one Spark session.

A room at the edge, like ``cli.py``: it drives runs through the job master's
narrow API (:class:`control.master.JobMaster`) and follows them through the
runtime's events; nothing in ``runtime/``, ``checkpoint/`` or ``control/``
imports it.

- :mod:`.auth`     the bearer token: generated on first start, a 0600 file, compared in constant time
- :mod:`.jobs`     the dispatcher: submitted jobs, their live progress, the history table's finished jobs
- :mod:`.views`    job objects in SeaTunnel's shape (jobDag, metrics) plus the plans and per-pipeline progress
- :mod:`.app`      the ASGI app (FastAPI): routes, token and body-size checks, JSON errors, redaction
- :mod:`.serve`    ``streaming-engine serve``: the Spark session, the app under uvicorn (TLS), shutdown
- :mod:`.client`   the CLI's side (``run --async``, ``list``): stdlib HTTP, no server code
"""
