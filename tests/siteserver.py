"""Serve a built site on loopback the way a static host does: the browser and Lighthouse runs.

The site lives under the path it has when hosted (e.g. /jax-remat-guide/, read from the pages'
canonical URL by builtsite.hosted_path), a missing path gets the site's 404.html with status 404
(as on GitHub Pages or Read the Docs), and, with ``compress=True``, text files are sent
gzip-compressed to a client that accepts it, as those hosts send them. Standard library only:
the browser session's environment has Playwright and no JAX, the Lighthouse session none at all.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import http.server
import io
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

# What GitHub Pages and Read the Docs compress; images and fonts (PNG, WebP, WOFF2) are
# compressed formats already.
COMPRESSED_TYPES = (
    "text/",
    "application/javascript",
    "application/json",
    "application/xml",
    "image/svg+xml",
)


def site_relative(url_path: str, site_path: str) -> str | None:
    """The file path under the site root for a URL path, or None when it is outside the site.

    >>> site_relative("/guide/tutorial/a.html?x=1", "/guide/")
    '/tutorial/a.html'
    >>> site_relative("/elsewhere/a.html", "/guide/") is None
    True
    """
    clean = urllib.parse.urlsplit(url_path).path
    if not clean.startswith(site_path):
        return None
    return "/" + clean[len(site_path) :]


def accepts_gzip(header: str | None) -> bool:
    """Whether an Accept-Encoding header allows gzip (and does not refuse it with q=0)."""
    for part in (header or "").split(","):
        name, *params = (piece.strip() for piece in part.split(";"))
        if name.lower() not in {"gzip", "*"}:
            continue
        for param in params:
            if param.startswith("q="):
                try:
                    return float(param[2:]) > 0
                except ValueError:
                    return False
        return True
    return False


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    """One request to the site; the class attributes are set per server by :func:`serve`."""

    site: Path
    site_path: str
    compress: bool

    def log_message(self, format: str, *args: object) -> None:  # keep test output readable
        pass

    def translate_path(self, path: str) -> str:
        inside = site_relative(path, self.site_path)
        return super().translate_path(inside if inside is not None else "/__outside_the_site__")

    def send_head(self):  # type: ignore[no-untyped-def]
        path = Path(self.translate_path(self.path))
        if path.is_dir() and (path / "index.html").is_file():
            if not self.path.split("?", 1)[0].endswith("/"):
                return super().send_head()  # the redirect to the folder's URL
            path = path / "index.html"
        ctype = self.guess_type(str(path))
        if (
            not self.compress
            or not path.is_file()
            or not ctype.startswith(COMPRESSED_TYPES)
            or not accepts_gzip(self.headers.get("Accept-Encoding"))
        ):
            return super().send_head()
        body = _gzipped(path, path.stat().st_mtime_ns)
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Vary", "Accept-Encoding")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        page = self.site / "404.html"
        if code != 404 or not page.is_file():
            super().send_error(code, message, explain)
            return
        body = page.read_bytes()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


@functools.lru_cache(maxsize=512)
def _gzipped(path: Path, mtime_ns: int) -> bytes:
    """The file gzipped at the level static hosts use (6), cached until the file changes."""
    return gzip.compress(path.read_bytes(), compresslevel=6, mtime=0)


@contextlib.contextmanager
def serve(site: Path, site_path: str, *, compress: bool = False) -> Iterator[str]:
    """Serve ``site`` under ``site_path`` on 127.0.0.1 (a free port); yields the server's origin.

    The origin has no trailing slash: the site's root is ``origin + site_path``.
    """
    handler = type(
        "BoundSiteHandler",
        (SiteHandler,),
        {"site": Path(site), "site_path": site_path, "compress": compress},
    )
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(site))
    )
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)
