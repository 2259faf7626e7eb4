"""The inspector: ``/ui``, a static page over the JSON API; ``/docs`` offline; ``/`` → ``/ui``.

The page is four files shipped in the package (``static/``: HTML, two scripts (the
repair log's view is ``repairs.js``), one style sheet), no build step. It calls the JSON API on the same origin with the
token the user pasted (kept in ``sessionStorage``, sent only in the
``Authorization`` header, never in a URL). Every answer of this module carries a
Content-Security-Policy without inline script or style (``CSP``): the page writes
what it shows with ``textContent``, so a message, a tool result, a file name or a
session name is text, never markup (docs/ui.md, decision 0085).

``/docs`` is Swagger UI from the ``swagger-ui-bundle-v2`` package's files, served
here (``/docs/static/``): it renders without the internet.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, HTTPException
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

STATIC = Path(__file__).resolve().parent / "static"
UI_PATH = "/ui"
ASSETS = "/ui/static/"
DOCS_ASSETS = "/docs/static/"
OPEN_PREFIXES = (ASSETS, DOCS_ASSETS)
"""The paths under these prefixes are served without a token (the gate, ``api.errors``)."""

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The policy of the inspector's page and files: nothing inline, nothing from elsewhere."""

HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}

# name -> media type: the only files served (no path from the request reaches the disk)
UI_FILES = {
    "app.js": "text/javascript; charset=utf-8",
    "repairs.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
DOCS_FILES = {
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
    "swagger-ui.css": "text/css; charset=utf-8",
    "favicon-32x32.png": "image/png",
}


def swagger_dir() -> Path:
    """The directory of Swagger UI's files (the ``swagger-ui-bundle-v2`` package)."""
    import swagger_ui_bundle

    return Path(swagger_ui_bundle.swagger_ui_path)


def _file(directory: Path, files: dict[str, str], name: str, headers: dict[str, str]) -> Response:
    """One of ``files`` from ``directory``, or 404 for a name not among them."""
    media = files.get(name)
    if media is None:
        raise HTTPException(404, "no such file")
    return FileResponse(directory / name, media_type=media, headers=headers)


def install_ui(app: FastAPI) -> None:
    """Add ``/`` (redirect), ``/ui`` and its files, and an offline ``/docs`` to ``app``.

    ``app`` must be built with ``docs_url=None``: this ``/docs`` replaces FastAPI's,
    which loads Swagger UI from a public CDN.
    """
    page = (STATIC / "index.html").read_bytes()
    docs = swagger_dir()

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        """The landing: the inspector."""
        return RedirectResponse(UI_PATH, status_code=307)

    @app.get(UI_PATH, include_in_schema=False)
    async def inspector() -> Response:
        """The inspector's page (its script does the rest)."""
        return Response(page, media_type="text/html; charset=utf-8", headers=HEADERS)

    @app.get(ASSETS + "{name}", include_in_schema=False)
    async def inspector_file(name: str) -> Response:
        """The inspector's script and style sheet."""
        return _file(STATIC, UI_FILES, name, HEADERS)

    @app.get("/docs", include_in_schema=False)
    async def swagger() -> HTMLResponse:
        """Swagger UI over ``/openapi.json``, from the package's files."""
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=DOCS_ASSETS + "swagger-ui-bundle.js",
            swagger_css_url=DOCS_ASSETS + "swagger-ui.css",
            swagger_favicon_url=DOCS_ASSETS + "favicon-32x32.png",
        )

    @app.get(DOCS_ASSETS + "{name}", include_in_schema=False)
    async def swagger_file(name: str) -> Response:
        """Swagger UI's script, style sheet and icon."""
        return _file(docs, DOCS_FILES, name, {"Cache-Control": "max-age=3600"})
