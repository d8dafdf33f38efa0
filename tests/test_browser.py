"""The built site in a real browser: Debian's Chromium driven by Playwright.

Run by `nox -s browser` after `nox -s docs`. Every page is loaded from a loopback server; the
tests fail on console errors, failed or third-party requests and serious accessibility
violations, and check the interactive pieces a reader uses.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.browser,
    # The loopback server's sockets are closed by the server thread, after pytest looks.
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

ROOT = Path(__file__).resolve().parent.parent
HTML = Path(os.environ.get("REMAT_GUIDE_HTML", ROOT / "_build" / "html"))
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

if not (HTML / "index.html").is_file():
    pytest.skip(f"no built site at {HTML}: run `nox -s docs` first", allow_module_level=True)
if not Path(CHROMIUM).is_file():
    pytest.skip(
        f"{CHROMIUM} is missing: install Debian's chromium package (apt-get install chromium)",
        allow_module_level=True,
    )
sync_api = pytest.importorskip("playwright.sync_api", reason="install the `browser` group")

PAGES = sorted(
    p.relative_to(HTML).as_posix()
    for p in HTML.rglob("*.html")
    if not p.relative_to(HTML).as_posix().startswith(("_", "genindex", "search"))
)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output readable
        pass


@pytest.fixture(scope="module")
def base_url():
    handler = functools.partial(_Quiet, directory=str(HTML))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    yield page
    context.close()


def _load(page, url):
    errors, failed, foreign = [], [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: failed.append(f"{r.url} ({r.failure})"))
    page.on(
        "response", lambda r: failed.append(f"{r.url} ({r.status})") if r.status >= 400 else None
    )
    page.on(
        "request",
        lambda r: (
            foreign.append(r.url)
            if not r.url.startswith(("http://127.0.0.1", "data:", "blob:"))
            else None
        ),
    )
    response = page.goto(url, wait_until="networkidle")
    return response, errors, failed, foreign


def test_pages_were_found():
    assert "index.html" in PAGES
    assert len(PAGES) >= 5


@pytest.mark.parametrize("name", PAGES)
def test_page_loads_cleanly(page, base_url, name):
    response, errors, failed, foreign = _load(page, f"{base_url}/{name}")
    assert response is not None
    assert response.ok
    assert errors == [], f"console errors on {name}"
    assert failed == [], f"failed requests on {name}"
    assert foreign == [], f"requests leaving the site on {name}"
    shots = HTML / "_screenshots"
    shots.mkdir(exist_ok=True)
    page.screenshot(path=str(shots / (name.replace("/", "__") + ".png")), full_page=False)


@pytest.mark.parametrize("name", PAGES)
def test_no_serious_accessibility_violations(page, base_url, name):
    from axe_playwright_python.sync_playwright import Axe

    _load(page, f"{base_url}/{name}")
    results = Axe().run(page)
    serious = [
        f"{v['id']} ({v['impact']}): {v['help']}"
        for v in results.response["violations"]
        if v["impact"] in {"serious", "critical"}
    ]
    assert serious == [], f"{name}: {serious}"


def test_search_finds_a_policy_name(page, base_url):
    _load(page, f"{base_url}/search.html?q=dots_saveable")
    page.wait_for_selector("#search-results li", timeout=15_000)
    assert page.locator("#search-results li").count() > 0


def test_solution_is_folded_until_clicked(page, base_url):
    _load(page, f"{base_url}/problems/checkpoint_dot_policy.html")
    dropdown = page.locator("details.sd-dropdown").last
    body = dropdown.locator(".sd-summary-content")
    assert not body.is_visible()
    dropdown.locator("summary").click()
    assert body.is_visible()


def test_dark_mode_switch(page, base_url):
    _load(page, f"{base_url}/tutorial/gradient-checkpointing.html")
    background = (
        "getComputedStyle(document.querySelector('div.cell div.highlight')).backgroundColor"
    )
    seen = {}
    for _ in range(3):  # the switch cycles through auto, light and dark
        page.locator(".theme-switch-button").first.click()
        seen[page.evaluate("document.documentElement.dataset.theme")] = page.evaluate(background)
    assert {"light", "dark"} <= set(seen)
    assert seen["light"] != seen["dark"], "code cells keep their light background in dark mode"


def test_copy_button_copies_the_code(browser, base_url):
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    _load(page, f"{base_url}/tutorial/gradient-checkpointing.html")
    cell = page.locator("div.cell div.highlight").first
    cell.hover()
    cell.locator("button.copybtn").click()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.strip()
    assert copied.strip() in cell.inner_text()
    context.close()


def test_download_menu_offers_the_notebook(page, base_url):
    _load(page, f"{base_url}/tutorial/gradient-checkpointing.html")
    link = page.locator("a[href$='.ipynb']").first
    href = link.get_attribute("href")
    response = page.request.get(f"{base_url}/tutorial/{href}")
    assert response.ok
    notebook = response.json()
    assert notebook["nbformat"] == 4
    assert notebook["cells"]
