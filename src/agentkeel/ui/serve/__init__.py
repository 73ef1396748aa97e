"""``keel serve``: an HTTP API and a web app over in-process Runtimes.

The package is imported only by ``keel serve`` (and tests); starlette and uvicorn load with it,
never on keel's other paths. ``stream`` (the per-session event log and its fan-out) and
``sessions`` (Runtimes driven from HTTP) know nothing of HTTP; ``app`` is the starlette layer.
"""
