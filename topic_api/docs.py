"""Swagger UI at ``/docs`` from the PyPI package ``swagger-ui-bundle`` (its bundled files, served
under ``/docs/static/``), and the dashboard's files (``/`` and ``/static/``). No CDN: the
pages work offline, and no inline script (the Content-Security-Policy of ``guard`` allows
none). Only this module imports ``swagger_ui_bundle``. Wired by ``app``."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

from topic_api.openapi.operations import HTML_PAGE, operation
from topic_api.responses import error

STATIC = Path(__file__).parent / "static"
SWAGGER_VERSION = "4.15.5"  # the bundle of swagger-ui-bundle 1.1 (Apache-2.0)

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Phrame topic API</title>
<link rel="stylesheet" href="/docs/static/swagger-ui.css">
<link rel="icon" href="/docs/static/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/static/swagger-ui-bundle.js"></script>
<script src="/static/swagger-init.js"></script>
</body>
</html>
"""


def swagger_files() -> StaticFiles:
    return StaticFiles(directory=str(swagger_ui_path))


def dashboard_files() -> StaticFiles:
    return StaticFiles(directory=str(STATIC), check_dir=False)


@operation("Swagger UI", HTML_PAGE, access="public")
async def docs_page(_: Request) -> Response:
    return HTMLResponse(PAGE)


@operation("the dashboard", HTML_PAGE, access="public", errors=(404,))
async def index(_: Request) -> Response:
    page = STATIC / "index.html"
    if not page.is_file():
        return error(404, f"no dashboard page installed ({page})")
    return FileResponse(page, media_type="text/html")
