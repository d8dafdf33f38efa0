"""The built site in a real browser: Debian's Chromium driven by Playwright.

Run by `nox -s browser` after `nox -s docs` (or `python -m pytest -m browser`; the site is read
from REMAT_GUIDE_HTML, by default _build/html). The site is served from a loopback server under
the same path it has when hosted (read from the pages' canonical URL), and a missing path gets the
site's 404 page, as on GitHub Pages or Read the Docs (tests/siteserver.py, shared with the
Lighthouse session). Every page that the build wrote is checked, in light and dark mode: no
console error, no failed request, no request leaving the server, no serious or critical axe-core
violation. The interactive pieces a reader uses are exercised on every page that has them:
folded solutions, copy buttons, the colour-mode switch, the download menu, search. Screenshots
(light and dark) and a table of transferred bytes per page go to <site>/_screenshots/, which no
page links to; REMAT_GUIDE_SCREENSHOTS=off leaves the screenshots out (CI does: no test reads
them, and drawing 50 full pages cost about 3 CPU-seconds each on the long ones).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import os
import re
import tomllib
import urllib.parse
from pathlib import Path

import pytest
from builtsite import HTML, hosted_path, pages
from siteserver import serve

pytestmark = [
    pytest.mark.browser,
    # The loopback server's sockets are closed by the server thread, after pytest looks.
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

# Debian's Chromium; REMAT_GUIDE_CHROMIUM names another Chromium-based browser (CI's Chrome).
CHROMIUM = os.environ.get("REMAT_GUIDE_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCHEMES = ["light", "dark"]

if not (HTML / "index.html").is_file():
    pytest.skip(
        f"no built site at {HTML}: build it first (`nox -s docs`), or point REMAT_GUIDE_HTML at "
        "a built site",
        allow_module_level=True,
    )
if not Path(CHROMIUM).is_file():
    pytest.skip(
        f"{CHROMIUM} is missing: install Debian's Chromium (`apt-get install chromium`), or name "
        "another Chromium in REMAT_GUIDE_CHROMIUM; Playwright cannot download a browser here",
        allow_module_level=True,
    )
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is missing: install the `browser` dependency group"
)


def _pages_with(pattern: str) -> list[str]:
    """The pages whose HTML matches a regular expression."""
    found = re.compile(pattern)
    return [name for name in PAGES if found.search((HTML / name).read_text(encoding="utf-8"))]


PAGES = pages()
SITE_PATH = hosted_path()
NOTEBOOK_PAGES = _pages_with(r'class="cell docutils container"')
DROPDOWN_PAGES = _pages_with(r"<details class=\"[^\"]*sd-dropdown")
CODE_PAGES = _pages_with(r'class="cell_input')
SHOTS = HTML / "_screenshots"
#: Full-page screenshots for a person to look at: every page in both modes (REMAT_GUIDE_SCREENSHOTS,
#: "on" by default, or "off"). No test reads them; the checks run the same either way.
_SCREENSHOTS_SETTING = os.environ.get("REMAT_GUIDE_SCREENSHOTS", "on")
if _SCREENSHOTS_SETTING not in {"on", "off"}:
    raise pytest.UsageError(
        f"REMAT_GUIDE_SCREENSHOTS is {_SCREENSHOTS_SETTING!r}: set it to on (the default) or off"
    )
SCREENSHOTS = _SCREENSHOTS_SETTING == "on"


@pytest.fixture(scope="module")
def server():
    """The site on loopback under its hosted path (tests/siteserver.py), uncompressed: the
    byte counts below add up the gzipped sizes themselves."""
    with serve(HTML, SITE_PATH) as origin:
        yield origin


@pytest.fixture(scope="module")
def base_url(server):
    """The URL of the site's root (ends with a slash)."""
    return server + SITE_PATH


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


def _context(browser, scheme: str, **options):
    options = {"viewport": {"width": 1280, "height": 900}, **options}
    return browser.new_context(color_scheme=scheme, **options)


@pytest.fixture
def new_page(browser):
    """Open pages in fresh browser contexts (no cache, no stored colour mode)."""
    contexts = []

    def open_page(scheme: str = "light", **options):
        context = _context(browser, scheme, **options)
        contexts.append(context)
        return context.new_page()

    yield open_page
    for context in contexts:
        context.close()


@pytest.fixture
def page(new_page):
    return new_page()


@pytest.fixture(scope="module")
def sizes():
    """Bytes transferred per page, written as a table once every page has been loaded."""
    table: dict[str, tuple[int, int, int]] = {}
    yield table
    if table:
        SHOTS.mkdir(exist_ok=True)
        width = max(len(name) for name in table)
        lines = [
            "Bytes per page load (fresh cache): as served here, and gzipped as hosts send them.",
            "",
            f"{'page':<{width}}  {'requests':>8}  {'KiB':>8}  {'KiB gzip':>8}",
            "-" * (width + 30),
        ]
        for name, (count, size, gz) in sorted(table.items()):
            lines.append(f"{name:<{width}}  {count:>8}  {size / 1024:>8.1f}  {gz / 1024:>8.1f}")
        (SHOTS / "sizes.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


class Visit:
    """A page loaded with everything that went wrong on the way recorded."""

    def __init__(self, page, url: str, origin: str):
        self.page = page
        self.errors: list[str] = []
        self.failed: list[str] = []
        self.foreign: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("requestfailed", lambda r: self.failed.append(f"{r.url} ({r.failure})"))
        page.on(
            "response",
            lambda r: self.failed.append(f"{r.url} ({r.status})") if r.status >= 400 else None,
        )
        page.on(
            "request",
            lambda r: (
                self.foreign.append(r.url)
                if not r.url.startswith((origin + "/", "data:", "blob:"))
                else None
            ),
        )
        self.response = page.goto(url, wait_until="networkidle")

    def transferred(self) -> tuple[int, int, int]:
        """(requests, bytes, gzipped bytes) for the page and everything it loaded.

        Bytes are what the loopback server sent (bodies and headers); it compresses nothing,
        whereas GitHub Pages and Read the Docs gzip text, so the gzipped size of each file is
        added up too: closer to what a reader downloads.
        """
        entries = self.page.evaluate(
            "[...performance.getEntriesByType('navigation'),"
            " ...performance.getEntriesByType('resource')]"
            ".map(e => [e.name, e.transferSize])"
        )
        gzipped = 0
        for url, _ in entries:
            path = urllib.parse.urlsplit(url).path
            local = HTML / urllib.parse.unquote(path.removeprefix(SITE_PATH))
            if local.is_file():
                gzipped += len(gzip.compress(local.read_bytes(), mtime=0))
        return len(entries), sum(size for _, size in entries), gzipped


@pytest.fixture
def visit(server):
    return lambda page, url: Visit(page, url, server)


def _render_everything(page, scheme: str) -> None:
    """Lay out the parts of the page the browser skips until they near the screen.

    Code cells below the first heading carry `content-visibility: auto` (docs/_static/remat.css):
    a reader's browser draws them on scrolling to them. A full-page screenshot would show them
    blank, and axe-core could not judge their colours, so both see the page drawn in full.

    Colours are judged as they end, not halfway: the theme's buttons fade their colours in over
    0.15 s (Bootstrap's `.btn` transition) when the script sets the colour mode after loading, and
    axe-core on a busy CI machine once read the header's search button mid-fade, in dark mode, as
    too little contrast. Transitions and animations are switched off (which ends a running one at
    its final value) once the page shows the mode it was opened in.
    """
    # A page in the wrong mode goes on: test_page_loads_cleanly says so.
    with contextlib.suppress(sync_api.TimeoutError):
        page.wait_for_function(
            "mode => document.documentElement.dataset.theme === mode", arg=scheme, timeout=10_000
        )
    page.add_style_tag(
        content="* { content-visibility: visible !important; }\n"
        "*, *::before, *::after { transition: none !important; animation: none !important; }"
    )


def _choose_mode(page, mode: str) -> None:
    """Pick a colour mode with the theme's switch in the header, as a reader does."""
    page.locator(".theme-switch-button:visible").first.click()
    page.locator(f".theme-change-button[data-mode='{mode}']:visible").first.click()


# Luminance of the first non-transparent background at or above an element (WCAG's formula).
_BACKGROUND = """el => {
  for (let node = el; node; node = node.parentElement) {
    const c = getComputedStyle(node).backgroundColor.match(/[\\d.]+/g).map(Number);
    if (c.length < 4 || c[3] > 0) {
      const lin = v => {
        v /= 255;
        return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
      };
      return 0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2]);
    }
  }
  return 1.0;
}"""


def test_pages_were_found():
    assert "index.html" in PAGES
    assert "404.html" in PAGES, "the 404 page is missing (sphinx-notfound-page and docs/404.md)"
    assert NOTEBOOK_PAGES, "no page has executed code cells"


@dataclasses.dataclass
class Observed:
    """What one load of a page in one colour mode showed: its loading, and axe-core's verdict."""

    status: int | None
    ok: bool
    errors: list[str]
    failed: list[str]
    foreign: list[str]
    theme: str
    transferred: tuple[int, int, int]
    serious: list[str]  #: axe-core's serious and critical violations, one line each


@pytest.fixture(scope="module")
def observed(browser, server, base_url):
    """Each page in each mode is loaded once, for both tests below (which fail apart): its load
    is recorded, a full-page screenshot taken (unless REMAT_GUIDE_SCREENSHOTS=off), and axe-core
    run on it as it was drawn."""
    from axe_playwright_python.sync_playwright import Axe

    seen_before: dict[tuple[str, str], Observed] = {}

    def observe(name: str, scheme: str) -> Observed:
        if (name, scheme) not in seen_before:
            page = _context(browser, scheme).new_page()
            seen = Visit(page, base_url + name, server)
            theme = page.evaluate("document.documentElement.dataset.theme")
            _render_everything(page, scheme)
            if SCREENSHOTS:
                SHOTS.mkdir(exist_ok=True)
                stem = name.removesuffix(".html").replace("/", "__")
                page.screenshot(path=str(SHOTS / f"{stem}.{scheme}.png"), full_page=True)
            serious = [
                f"{v['id']} ({v['impact']}): {v['help']} at "
                + ", ".join(" ".join(node["target"]) for node in v["nodes"][:3])
                for v in Axe().run(page).response["violations"]
                if v["impact"] in {"serious", "critical"}
            ]
            response = seen.response
            seen_before[(name, scheme)] = Observed(
                response.status if response is not None else None,
                response is not None and response.ok,
                seen.errors,
                seen.failed,
                seen.foreign,
                theme,
                seen.transferred(),
                serious,
            )
            page.context.close()
        return seen_before[(name, scheme)]

    return observe


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("name", PAGES)
def test_page_loads_cleanly(observed, sizes, name, scheme):
    seen = observed(name, scheme)
    assert seen.status is not None, f"{name}: no response"
    assert seen.ok, f"{name}: HTTP {seen.status}"
    assert seen.errors == [], f"console errors on {name} ({scheme})"
    assert seen.failed == [], f"failed requests on {name} ({scheme})"
    assert seen.foreign == [], f"requests leaving the site on {name} ({scheme})"
    assert seen.theme == scheme
    if scheme == "light":
        sizes[name] = seen.transferred


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("name", PAGES)
def test_no_serious_accessibility_violations(observed, name, scheme):
    assert observed(name, scheme).serious == [], (
        f"{name} ({scheme}): {observed(name, scheme).serious}"
    )


def test_a_missing_page_gets_the_404_page_from_any_depth(page, visit, base_url):
    seen = visit(page, base_url + "no/such/folder/page.html")
    assert seen.response.status == 404
    assert "not found" in page.title().lower()
    # Everything the page loads (styles, scripts, logo) resolves, although it sits three
    # folders below the site's root.
    document = seen.response.url
    assert [f for f in seen.failed if not f.startswith(document)] == []
    assert seen.errors == [] or all("404" in e for e in seen.errors), seen.errors
    assert seen.foreign == []
    home = page.locator("article a.reference.internal").first.get_attribute("href")
    assert page.request.get(urllib.parse.urljoin(document, home)).ok, home


def test_search_finds_a_policy_name(page, visit, base_url):
    seen = visit(page, base_url + "search.html?q=dots_saveable")
    page.wait_for_selector("#search-results li", timeout=15_000)
    results = page.locator("#search-results li a")
    assert results.count() > 0
    assert seen.errors == []
    for href in results.evaluate_all("links => links.map(a => a.href)"):
        assert page.request.get(href).ok, href


#: What readers paste, and the sections that answer it (tests/search_queries.toml, shared with
#: tests/test_search.py, which ranks the same queries with Node).
SEARCH_QUERIES = tomllib.loads(
    (Path(__file__).with_name("search_queries.toml")).read_text(encoding="utf-8")
)["query"]


@pytest.mark.parametrize("query", SEARCH_QUERIES, ids=[q["text"][:40] for q in SEARCH_QUERIES])
def test_search_puts_an_answering_section_in_the_first_three(page, visit, base_url, query):
    seen = visit(page, base_url + "search.html?" + urllib.parse.urlencode({"q": query["text"]}))
    # The summary line is written when the last result is shown.
    page.wait_for_function(
        "document.querySelector('#search-results .search-summary')?.innerText.length > 0",
        timeout=15_000,
    )
    hrefs = page.locator("#search-results li a").evaluate_all("links => links.map(a => a.href)")
    found = []
    for href in hrefs[:3]:
        url = urllib.parse.urlsplit(href)
        path = url.path.removeprefix(SITE_PATH).removesuffix(".html")
        found.append(f"{path}#{url.fragment}" if url.fragment else path)
    assert set(found) & set(query["sections"]), f"{query['text']!r}: first three {found}"
    assert seen.errors == []
    assert seen.foreign == []


@pytest.mark.parametrize("name", DROPDOWN_PAGES)
def test_folded_content_stays_hidden_until_clicked(page, visit, base_url, name):
    visit(page, base_url + name)
    dropdowns = page.locator("article details.sd-dropdown")
    assert dropdowns.count() > 0
    for i in range(dropdowns.count()):
        dropdown = dropdowns.nth(i)
        if dropdown.get_attribute("open") is not None:
            continue  # written `:open:` on purpose
        body = dropdown.locator(".sd-summary-content")
        assert not body.is_visible(), f"dropdown {i} on {name} shows its content folded"
        dropdown.locator("summary").first.click()
        assert body.is_visible(), f"dropdown {i} on {name} does not open"


@pytest.mark.parametrize("name", CODE_PAGES[:3])
def test_copy_button_copies_the_code(new_page, visit, base_url, name):
    page = new_page(permissions=["clipboard-read", "clipboard-write"])
    visit(page, base_url + name)
    block = page.locator("article div.cell_input div.highlight:visible").first
    block.hover()
    button = block.locator("button.copybtn").first
    button.click()
    copied = page.evaluate("navigator.clipboard.readText()")
    shown = block.locator("pre").inner_text()

    def normal(text):
        return "\n".join(line.rstrip() for line in text.strip().splitlines())

    assert copied.strip(), f"the copy button on {name} copied nothing"
    assert normal(copied) == normal(shown)


def test_colour_mode_switch(page, visit, base_url):
    visit(page, base_url + "index.html")
    seen = set()
    for mode in ("dark", "light", "dark"):
        _choose_mode(page, mode)
        theme = page.evaluate("document.documentElement.dataset.theme")
        assert theme == mode
        seen.add(theme)
    # The choice is kept for the next page.
    page.goto(base_url + NOTEBOOK_PAGES[0], wait_until="networkidle")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"


def _cell_page() -> str:
    """A page with a visible code cell and a text output."""
    for name in NOTEBOOK_PAGES:
        text = (HTML / name).read_text(encoding="utf-8")
        if 'class="cell_input' in text and 'class="output text_plain' in text:
            return name
    return NOTEBOOK_PAGES[0]


@pytest.mark.parametrize(
    ("os_scheme", "mode"),
    [("light", "light"), ("dark", "dark"), ("dark", "light"), ("light", "dark")],
)
def test_code_cells_follow_the_colour_mode(new_page, visit, base_url, os_scheme, mode):
    """Cells and outputs are light on a light page and dark on a dark one, whatever the OS says.

    myst-nb 1.4 draws cells from the theme's data-theme; a site seen in light mode on a dark OS
    has shown dark cells elsewhere (see REFERENCES.md), so both mixed cases are checked.
    """
    name = _cell_page()
    page = new_page(os_scheme)
    visit(page, base_url + name)
    _choose_mode(page, mode)
    assert page.evaluate("document.documentElement.dataset.theme") == mode
    cell = page.locator("article div.cell div.cell_input div.highlight pre:visible").first
    output = page.locator("article div.cell div.cell_output pre:visible").first
    checks = [("code cell", cell), ("cell output", output)]
    banner = page.locator("article div.cell_output .text_html:has(> .remat-runinfo)")
    if banner.count():  # an HTML output drawn with the theme's colours
        checks.append(("runinfo banner", banner.first))
    for what, element in checks:
        luminance = element.evaluate(_BACKGROUND)
        if mode == "light":
            assert luminance > 0.5, f"{what} on {name} is dark in light mode ({luminance:.2f})"
        else:
            assert luminance < 0.2, f"{what} on {name} is light in dark mode ({luminance:.2f})"
        text = element.evaluate(
            "el => { const c = getComputedStyle(el).color.match(/[\\d.]+/g).map(Number);"
            " return (c[0] + c[1] + c[2]) / 3; }"
        )
        assert (text > 128) == (mode == "dark"), f"{what} text colour does not follow {mode}"


@pytest.mark.parametrize("name", NOTEBOOK_PAGES)
def test_download_menu_offers_the_notebook_and_the_source(page, visit, base_url, name):
    visit(page, base_url + name)
    links = page.locator(".dropdown-download-buttons a")
    hrefs = links.evaluate_all("links => links.map(a => a.href)")
    notebooks = [h for h in hrefs if h.endswith(".ipynb")]
    sources = [h for h in hrefs if h.endswith(".md")]
    assert notebooks, f"{name}: no .ipynb in the download menu ({hrefs})"
    assert sources, f"{name}: no .md in the download menu ({hrefs})"
    notebook = json.loads(page.request.get(notebooks[0]).text())
    assert notebook["nbformat"] == 4
    code = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert code, f"{notebooks[0]} has no code cell"
    assert any(c.get("outputs") for c in code), f"{notebooks[0]} carries no outputs"
    source = page.request.get(sources[0])
    assert source.ok
    assert "```{code-cell}" in source.text()


def test_header_icons_are_drawn(page, visit, base_url):
    """The buttons' icons come from the theme's icon font (the Font Awesome script is a stub)."""
    seen = visit(page, base_url + NOTEBOOK_PAGES[0])
    assert seen.failed == []
    icons = page.locator(".article-header-buttons .btn i:visible, .theme-switch-button i:visible")
    assert icons.count() >= 3
    for i in range(icons.count()):
        drawn = icons.nth(i).evaluate(
            """el => {
              const glyph = getComputedStyle(el, '::before');
              return {
                width: el.getBoundingClientRect().width,
                content: glyph.content,
                font: glyph.fontFamily,
              };
            }"""
        )
        assert drawn["width"] >= 8, drawn
        assert drawn["content"] not in {"none", "normal", '""'}, drawn
        assert "Font Awesome" in drawn["font"], drawn
    assert page.evaluate("document.fonts.check('900 16px \"Font Awesome 7 Free\"')")


@pytest.mark.parametrize(
    ("width", "height", "where"),
    [(1280, 900, ".bd-sidebar-primary"), (390, 844, ".bd-header-article")],
    ids=["desktop", "phone"],
)
def test_one_search_control_on_screen_and_it_opens_the_search(
    new_page, visit, base_url, width, height, where
):
    """One search control in sight (pydata-sphinx-theme 0.20's own header, with a second search
    field above the book theme's page, is left empty in conf.py): the sidebar's field on a wide
    screen, the article header's button on a phone. It opens the search dialog."""
    page = new_page(viewport={"width": width, "height": height})
    visit(page, base_url + "index.html")
    shown = page.locator(".search-button-field:visible, .search-button:visible")
    boxes = [shown.nth(i).bounding_box() for i in range(shown.count())]
    on_screen = [i for i, box in enumerate(boxes) if box and box["width"] > 0 and box["y"] < height]
    assert len(on_screen) == 1, boxes
    control = shown.nth(on_screen[0])
    assert control.evaluate(f"el => el.closest('{where}') !== null")
    control.click()
    page.locator("#pst-search-dialog input[name=q]").wait_for(state="visible", timeout=5_000)
