"""The built site as files: links resolve, no machine paths, offline inventories, reproducible.

Tests over a built site read REMAT_GUIDE_HTML (default _build/html) and skip, saying how to build
it, where there is none. The reproducibility test builds the site twice (slow, about a minute).
"""

from __future__ import annotations

import filecmp
import html.parser
import importlib.util
import json
import re
import subprocess
import sys
import urllib.parse
import zlib
from pathlib import Path

import pytest
from builtsite import HTML, ROOT, hosted_path, installed_from_lock, pages

INVENTORIES = ROOT / "docs" / "_inventories"
TEXT_SUFFIXES = {".html", ".js", ".css", ".txt", ".ipynb", ".md", ".xml", ".json", ".svg"}


def _load_make_inventories():
    spec = importlib.util.spec_from_file_location(
        "make_inventories", ROOT / "docs" / "_tools" / "make_inventories.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read_inventory(path: Path) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """(header lines, {name: (role, location)}) of an objects.inv, parsed independently."""
    raw = path.read_bytes()
    header, body = [], raw
    for _ in range(4):
        line, body = body.split(b"\n", 1)
        header.append(line.decode())
    entries = {}
    for line in zlib.decompress(body).decode().splitlines():
        name, role, _priority, location, _display = line.split(" ", 4)
        entries[name] = (role, location.replace("$", name))
    return header, entries


def _built_site() -> Path:
    if not (HTML / "index.html").is_file():
        pytest.skip(f"no built site at {HTML}: build it first (`nox -s docs`)")
    return HTML


def _site_files(suffixes: set[str]) -> list[Path]:
    return [
        p
        for p in _built_site().rglob("*")
        if p.is_file()
        and p.suffix in suffixes
        and not p.relative_to(HTML).as_posix().startswith(("_screenshots/", "_static/mathjax/"))
    ]


# --- Inventories for the JAX and Flax API links -------------------------------------------------


def test_committed_inventories_match_their_list(tmp_path):
    module = _load_make_inventories()
    module.write(tmp_path)
    for stem in module.INVENTORIES:
        committed, fresh = INVENTORIES / f"{stem}.inv", tmp_path / f"{stem}.inv"
        assert committed.is_file(), f"{committed} is missing: run docs/_tools/make_inventories.py"
        assert _read_inventory(committed) == _read_inventory(fresh), (
            f"{committed} is out of date: run docs/_tools/make_inventories.py"
        )


def test_every_checkpoint_policy_of_the_installed_jax_has_a_link():
    import jax

    if not installed_from_lock():  # jax 0.11.2 has three more names than the lock's jax, say
        pytest.skip(
            "the site's links are made for the lock's JAX; this environment is not the lock's"
        )

    public = {n for n in dir(jax.checkpoint_policies) if not n.startswith("_")}
    _, entries = _read_inventory(INVENTORIES / "jax.inv")
    listed = {n.removeprefix("jax.checkpoint_policies.") for n in entries}
    assert public - listed == set(), "add these policies to docs/_tools/make_inventories.py"


@pytest.mark.parametrize(
    ("stem", "name", "location"),
    [
        ("jax", "jax.checkpoint", "_autosummary/jax.checkpoint.html"),
        ("jax", "jax.remat", "_autosummary/jax.checkpoint.html"),
        ("jax", "jax.grad", "_autosummary/jax.grad.html"),
        ("jax", "jax.lax.scan", "_autosummary/jax.lax.scan.html"),
        (
            "jax",
            "jax.ad_checkpoint.checkpoint_name",
            "_autosummary/jax.ad_checkpoint.checkpoint_name.html",
        ),
        (
            "jax",
            "jax.checkpoint_policies.dots_saveable",
            "_autosummary/jax.checkpoint_policies.dots_saveable.html",
        ),
        ("flax", "flax.nnx.remat", "api_reference/flax.nnx/transforms.html#flax.nnx.remat"),
        (
            "flax_linen",
            "flax.linen.checkpoint",
            "api_reference/flax.linen/transformations.html#flax.linen.remat",
        ),
    ],
)
def test_inventory_entries_point_at_upstream_pages(stem, name, location):
    header, entries = _read_inventory(INVENTORIES / f"{stem}.inv")
    assert header[0] == "# Sphinx inventory version 2"
    assert entries[name][1] == location


def test_sphinx_reads_the_inventories():
    inventory = pytest.importorskip("sphinx.util.inventory", reason="needs the docs group")
    for path in INVENTORIES.glob("*.inv"):
        loaded = inventory.InventoryFile.loads(path.read_bytes(), uri="https://example.invalid/")
        loaded = getattr(loaded, "data", loaded)  # Sphinx 9 wraps the mapping
        names = {name for objects in loaded.values() for name in objects}
        assert names == set(_read_inventory(path)[1]), path.name


def test_pages_link_api_names_to_upstream_docs():
    """Where a page uses an API role, the link goes to the upstream docs, not nowhere."""
    site = _built_site()
    found = 0
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        for href in re.findall(r'<a class="reference external" href="([^"]+)"', text):
            if href.startswith(("https://docs.jax.dev/", "https://flax")):
                found += 1
                assert "_autosummary/" in href or "api_reference/" in href or ".html" in href
    if found == 0:
        pytest.skip("no page uses an API role such as {py:func}`jax.checkpoint` yet")


# --- Links, paths and third-party requests in the built site ------------------------------------


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.assets: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key) and (key == "id" or tag == "a"):
                self.ids.add(attrs[key])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        if tag in {"script", "img", "source", "iframe"} and attrs.get("src"):
            self.links.append(attrs["src"])
            self.assets.append(attrs["src"])
        if tag == "link" and attrs.get("href"):
            self.links.append(attrs["href"])
            if set((attrs.get("rel") or "").split()) & {"stylesheet", "icon", "preload", "script"}:
                self.assets.append(attrs["href"])


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def test_internal_links_and_anchors_resolve():
    site = _built_site()
    prefix = hosted_path(site)
    ids: dict[Path, set[str]] = {}
    broken = []
    for page in _site_files({".html"}):
        if page.relative_to(site).as_posix().startswith("_static/"):
            continue
        for link in _parse(page).links:
            parts = urllib.parse.urlsplit(link)
            if parts.scheme or link.startswith("//") or not (parts.path or parts.fragment):
                continue
            if parts.path.startswith("/"):
                # Only the 404 page, served at any depth, may use root-relative links.
                if page.name != "404.html" or not parts.path.startswith(prefix):
                    broken.append(f"{page.relative_to(site)}: root-relative {link}")
                    continue
                target = site / urllib.parse.unquote(parts.path[len(prefix) :])
            elif parts.path:
                target = (page.parent / urllib.parse.unquote(parts.path)).resolve()
            else:
                target = page
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{page.relative_to(site)}: {link} (no such file)")
                continue
            if parts.fragment and target.suffix == ".html":
                if target not in ids:
                    ids[target] = _parse(target).ids
                if urllib.parse.unquote(parts.fragment) not in ids[target]:
                    broken.append(f"{page.relative_to(site)}: {link} (no such anchor)")
    assert broken == []


def test_pages_load_nothing_from_other_sites():
    """Scripts, styles, fonts and images all come from the site itself (no CDN, no web fonts)."""
    foreign = []
    for page in _site_files({".html"}):
        for asset in _parse(page).assets:
            if urllib.parse.urlsplit(asset).scheme in {"http", "https"} or asset.startswith("//"):
                foreign.append(f"{page.relative_to(HTML)}: {asset}")
    for sheet in _site_files({".css"}):
        for url in re.findall(r"url\(\s*['\"]?((?:https?:)?//[^'\")]+)", sheet.read_text("utf-8")):
            foreign.append(f"{sheet.relative_to(HTML)}: {url}")
    assert foreign == []


def _machine_paths() -> list[str]:
    found = {str(ROOT), sys.prefix, sys.base_prefix, str(Path.home())}
    return sorted({p for p in found if len(p) > 1})


MACHINE_MARKERS = re.compile(
    r"(?<![\w.])(?:/tmp/|/root/|/home/[^/\s]+/|/work/|/Users/[^/\s]+/|[A-Z]:\\\\Users\\\\)"
    r"|site-packages|dist-packages|ipykernel_\d+"
)


def test_no_page_shows_a_path_of_the_build_machine():
    leaks = []
    for path in _site_files(TEXT_SUFFIXES):
        text = path.read_text(encoding="utf-8", errors="replace")
        for prefix in _machine_paths():
            if prefix + "/" in text:
                leaks.append(f"{path.relative_to(HTML)}: {prefix}")
        for match in MACHINE_MARKERS.finditer(text):
            start = max(match.start() - 40, 0)
            leaks.append(f"{path.relative_to(HTML)}: ...{text[start : match.end() + 40]}...")
    assert leaks == []


def test_the_site_was_built_executed():
    """Tests of the built pages mean something only on an executed build.

    A build that executes only some pages (``REMAT_GUIDE_EXECUTE_ONLY``) writes the others
    without outputs and every ``{glue:text}`` of theirs as nothing, with no warning: a figure in
    prose would vanish and these tests would pass on it. So: every downloadable notebook of a
    page with code cells has outputs, and no paragraph shows the double space an empty glue
    leaves between two words.
    """
    site = _built_site()
    without_outputs = []
    for notebook in sorted((site / "_sources").rglob("*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        code = [c for c in cells if c["cell_type"] == "code"]
        if code and not any(c.get("outputs") for c in code):
            without_outputs.append(notebook.relative_to(site).as_posix())
    assert without_outputs == [], (
        "pages built without outputs (a REMAT_GUIDE_EXECUTE_ONLY build?): run `nox -s docs`"
    )
    empty_glue = []
    for page in pages(site):
        # Prose only: tables and code (a recorded error message, say) may hold double spaces.
        html = re.sub(r"<table.*?</table>", "", (site / page).read_text("utf-8"), flags=re.S)
        for paragraph in re.findall(r"<p>(.*?)</p>", html, re.S):
            text = re.sub(r"<[^>]+>", "", re.sub(r"<code.*?</code>", "x", paragraph, flags=re.S))
            match = re.search(r"[a-z,;:] {2,}[a-z(]", text)
            if match:
                empty_glue.append(
                    f"{page}: ...{text[max(match.start() - 40, 0) : match.end() + 20]}"
                )
    assert empty_glue == [], "text with a hole where a glued value belongs"


def test_hosting_files_are_there():
    site = _built_site()
    for name in ("sitemap.xml", "404.html", "favicon.ico"):
        assert (site / name).is_file(), (
            f"{site / name} is missing: rebuild with the docs group installed (sphinx-sitemap, "
            "sphinx-notfound-page) and the current conf.py"
        )
    sitemap = (site / "sitemap.xml").read_text(encoding="utf-8")
    for page in pages(site):
        if page == "404.html":
            continue  # served for missing paths, not a page to index
        assert f"/{page}</loc>" in sitemap, f"{page} is missing from sitemap.xml"
    assert (site / "favicon.ico").read_bytes()[:4] == b"\x00\x00\x01\x00"
    index = (site / "index.html").read_text(encoding="utf-8")
    card = re.search(r'<meta property="og:image" content="([^"]+)"', index)
    assert card is not None
    assert (
        site / urllib.parse.urlsplit(card.group(1)).path.removeprefix(hosted_path(site))
    ).is_file()


# --- Expected errors show their message, not a wall of traceback -------------------------------

#: The most lines of traceback a cell's error output may show (CONTRIBUTING.md, "A page": a
#: page with raises-exception cells runs `%xmode minimal` in a remove-cell after its banner).
MAX_TRACEBACK_LINES = 12


class _ErrorOutputs(html.parser.HTMLParser):
    """The text of every cell error output (myst-nb's `output traceback` element) in a page."""

    def __init__(self):
        super().__init__()
        self.outputs: list[str] = []
        self._depth = 0  # elements open inside the current error output; 0 when outside one
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if self._depth:
            self._depth += 1
        elif {"output", "traceback"} <= set((dict(attrs).get("class") or "").split()):
            self._depth, self._text = 1, []

    def handle_startendtag(self, tag, attrs):
        pass  # a void element (<br/>) opens nothing

    def handle_endtag(self, tag):
        if self._depth:
            self._depth -= 1
            if not self._depth:
                self.outputs.append("".join(self._text))

    def handle_data(self, data):
        if self._depth:
            self._text.append(data)


def error_outputs(page_html: str) -> list[str]:
    parser = _ErrorOutputs()
    parser.feed(page_html)
    return parser.outputs


def traceback_lines(output: str) -> int:
    return len(output.strip("\n").splitlines())


def test_error_output_parser_finds_both_renderings_and_counts_lines():
    """The parser behind the 12-line rule reads both forms myst-nb writes, and can fail."""
    highlighted = (
        '<div class="output traceback highlight-ipythontb notranslate"><div class="highlight">'
        '<pre><span></span><span class="ne">TypeError</span>: bad<br/>\n</pre></div></div>'
    )
    long = "\n".join(f'  File "x.py", line {i}, in f' for i in range(13))
    literal = f'<pre class="output traceback literal-block">{long}\n</pre><p>after</p>'
    found = error_outputs(f"<p>before</p>{highlighted}<div>{literal}</div>")
    assert found == ["TypeError: bad\n", long + "\n"]
    assert [traceback_lines(o) for o in found] == [1, 13]
    assert traceback_lines(found[1]) > MAX_TRACEBACK_LINES


def test_no_error_output_shows_more_than_12_lines_of_traceback():
    pages = _site_files({".html"})
    shown = {page: error_outputs(page.read_text(encoding="utf-8")) for page in pages}
    if not any(shown.values()):
        pytest.skip("no executed page in this build shows an error output")
    too_long = [
        f"{page.relative_to(HTML)}: {traceback_lines(o)} lines, starting {o.strip()[:80]!r}"
        for page, outputs in shown.items()
        for o in outputs
        if traceback_lines(o) > MAX_TRACEBACK_LINES
    ]
    assert too_long == [], (
        "put `%xmode minimal` in a remove-cell right after the banner (CONTRIBUTING.md)"
    )


# --- Two builds of one commit give the same site ------------------------------------------------


def _differences(a: Path, b: Path) -> list[str]:
    differ = []
    files_a = {p.relative_to(a) for p in a.rglob("*") if p.is_file()}
    files_b = {p.relative_to(b) for p in b.rglob("*") if p.is_file()}
    differ += [f"only in the first build: {p}" for p in sorted(files_a - files_b)]
    differ += [f"only in the second build: {p}" for p in sorted(files_b - files_a)]
    for rel in sorted(files_a & files_b):
        if not filecmp.cmp(a / rel, b / rel, shallow=False):
            differ.append(f"differs: {rel}")
    return differ


@pytest.mark.slow
def test_two_builds_of_one_commit_are_identical(sphinx_build, tmp_path):
    """Every file of two builds is the same, byte for byte (no timestamps, no machine paths).

    Only the front page executes (REMAT_GUIDE_EXECUTE_ONLY=index), which keeps the test near a
    minute; the builds share one execution cache, as two builds of one commit do, so cell outputs
    (timings, say) come from one execution. The two builds use different folders, so a folder name
    that leaked into a page would show up as a difference.
    """
    env = {"REMAT_GUIDE_BUILD_DIR": str(tmp_path / "cache"), "REMAT_GUIDE_EXECUTE_ONLY": "index"}
    outs = [tmp_path / "first" / "html", tmp_path / "second-build" / "html"]
    for out in outs:
        result = sphinx_build(ROOT / "docs", out, env=env)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    assert _differences(*outs) == []


# --- API roles resolve offline, and a missing inventory degrades to plain text ------------------

ROLES_PAGE = """# Roles

{py:func}`jax.checkpoint`, {py:func}`~jax.checkpoint_policies.dots_saveable`,
{py:func}`jax.ad_checkpoint.checkpoint_name`, {py:func}`nn.checkpoint <flax.linen.checkpoint>`,
{py:func}`flax.nnx.remat`, {py:func}`jax.lax.scan`.

```{toctree}
other
```
"""


def _roles_build(
    sphinx_build, tmp_path: Path, inventories: Path
) -> tuple[subprocess.CompletedProcess, str]:
    """Build a page of API roles with the given inventories (warnings reported, not errors)."""
    source = tmp_path / "docs"
    source.mkdir()
    (source / "index.md").write_text(ROLES_PAGE, encoding="utf-8")
    (source / "other.md").write_text("# Another page\n", encoding="utf-8")  # the theme wants a toc
    env = {
        "REMAT_GUIDE_BUILD_DIR": str(tmp_path / "build"),
        "REMAT_GUIDE_INVENTORIES": str(inventories),
    }
    result = sphinx_build(source, tmp_path / "html", env=env, strict=False)
    page = tmp_path / "html" / "index.html"
    return result, page.read_text(encoding="utf-8") if page.is_file() else ""


@pytest.mark.slow
def test_api_roles_link_to_upstream_docs_offline(sphinx_build, tmp_path):
    result, page = _roles_build(sphinx_build, tmp_path, INVENTORIES)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "WARNING" not in result.stderr, result.stderr[-4000:]
    for href in [
        "https://docs.jax.dev/en/latest/_autosummary/jax.checkpoint.html",
        "https://docs.jax.dev/en/latest/_autosummary/jax.checkpoint_policies.dots_saveable.html",
        "https://docs.jax.dev/en/latest/_autosummary/jax.ad_checkpoint.checkpoint_name.html",
        "https://docs.jax.dev/en/latest/_autosummary/jax.lax.scan.html",
        "https://flax.readthedocs.io/en/latest/api_reference/flax.nnx/transforms.html"
        "#flax.nnx.remat",
        "https://flax-linen.readthedocs.io/en/latest/api_reference/flax.linen/"
        "transformations.html#flax.linen.remat",
    ]:
        assert f'href="{href}"' in page, href
    # The tilde shows the last part of the name; an explicit title replaces it.
    assert '<span class="pre">dots_saveable</span></code></a>' in page
    assert '<span class="pre">nn.checkpoint</span></code></a>' in page


@pytest.mark.slow
def test_a_missing_inventory_leaves_plain_text_and_one_clear_warning(sphinx_build, tmp_path):
    empty = tmp_path / "no-inventories"
    empty.mkdir()
    result, page = _roles_build(sphinx_build, tmp_path, empty)
    assert result.returncode == 0, result.stderr[-4000:]
    warnings = [line for line in result.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1, warnings
    assert "make_inventories.py" in warnings[0]
    assert "docs.jax.dev" not in page
    assert '<span class="pre">jax.checkpoint</span>' in page
