"""Fast on a phone: the Lighthouse budget's logic, the loopback server, the build's rewrites.

`nox -s lighthouse` runs Lighthouse itself (too slow and too machine-dependent for a test); here
the pieces it relies on are checked against small inputs made in each test: how a report is
scored against the budget (tests/lighthouse.py), what the server sends (tests/siteserver.py),
and what docs/_ext/performance.py does to a page (math as MathML, deferred scripts, sized
images). The last tests read the built site (skipped without one): every page as built is the
way the rewrites promise.
"""

from __future__ import annotations

import dataclasses
import gzip
import importlib.util
import json
import re
import struct
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
import zlib
from pathlib import Path
from typing import ClassVar

import lighthouse as lh
import pytest
from builtsite import HTML, ROOT, pages
from siteserver import accepts_gzip, serve, site_relative


def _load_performance():
    pytest.importorskip("docutils", reason="needs the docs dependency group (the site's extension)")
    spec = importlib.util.spec_from_file_location(
        "performance", ROOT / "docs" / "_ext" / "performance.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


performance = _load_performance()


# --- A Lighthouse report, made small --------------------------------------------------------------


def _report(
    *,
    perf: float = 0.95,
    seo_crawlable: float = 1.0,
    a11y: float = 1.0,
    best: float = 1.0,
    byte_weight: int = 300_000,
    requests: int = 20,
) -> dict:
    """A report (lhr) with the fields tests/lighthouse.py reads, scores set per category."""
    audits = {
        "first-contentful-paint": {"score": perf, "numericValue": 1500.0},
        "largest-contentful-paint": {"score": perf, "numericValue": 2500.0},
        "total-blocking-time": {"score": 1.0, "numericValue": 10.0},
        "cumulative-layout-shift": {"score": 1.0, "numericValue": 0.01},
        "speed-index": {"score": 1.0, "numericValue": 2000.0},
        "total-byte-weight": {"score": 1.0, "numericValue": byte_weight},
        "network-requests": {"details": {"items": [{}] * requests}},
        "color-contrast": {"score": a11y},
        "image-alt": {"score": 1.0},
        "aria-hidden": {"score": None, "scoreDisplayMode": "notApplicable"},
        "errors-in-console": {"score": best},
        "is-crawlable": {"score": seo_crawlable},
        "document-title": {"score": 1.0},
        "structured-data": {"score": None, "scoreDisplayMode": "manual"},
        "render-blocking-resources": {"score": 0.0, "scoreDisplayMode": "metricSavings"},
    }
    categories = {
        "performance": [
            ("first-contentful-paint", 10),
            ("largest-contentful-paint", 25),
            ("total-blocking-time", 30),
            ("cumulative-layout-shift", 25),
            ("speed-index", 10),
            ("render-blocking-resources", 0),
        ],
        "accessibility": [("color-contrast", 7), ("image-alt", 10), ("aria-hidden", 10)],
        "best-practices": [("errors-in-console", 1)],
        "seo": [("is-crawlable", 4.043478260869565), ("document-title", 1), ("structured-data", 0)],
    }
    return {
        "audits": audits,
        "categories": {
            name: {"auditRefs": [{"id": i, "weight": w} for i, w in refs]}
            for name, refs in categories.items()
        },
        "environment": {"benchmarkIndex": 1500.0},
    }


def test_category_score_is_the_weighted_mean_of_the_audits_that_apply():
    report = _report(perf=0.5)
    # 10 and 25 weigh 0.5, the other 65 weigh 1; the weight-0 audit counts for nothing.
    assert lh.category_score(report, "performance") == pytest.approx((35 * 0.5 + 65) / 100)
    # notApplicable (aria-hidden) leaves the weights: 7 × 0.4 + 10 × 1 over 17.
    report = _report(a11y=0.4)
    assert lh.category_score(report, "accessibility") == pytest.approx((7 * 0.4 + 10) / 17)


def test_an_exempt_audit_leaves_the_score():
    report = _report(seo_crawlable=0.0)
    assert lh.category_score(report, "seo") == pytest.approx(1 / 5.043478260869565)
    assert lh.category_score(report, "seo", exempt={"is-crawlable"}) == 1.0


def test_a_category_where_no_audit_applies_has_no_score():
    report = _report()
    report["categories"]["seo"]["auditRefs"] = [{"id": "structured-data", "weight": 0}]
    assert lh.category_score(report, "seo") is None


def test_the_404_page_alone_is_excused_its_noindex():
    report = _report(seo_crawlable=0.0)
    missing = lh.parse(report, "404.html")
    other = lh.parse(report, "index.html")
    assert missing.scores["seo"] == 1.0
    assert lh.over_budget(missing) == []
    assert other.scores["seo"] < 1.0
    assert other.failed_audits["seo"] == ["is-crawlable"]
    assert any("seo" in problem and "is-crawlable" in problem for problem in lh.over_budget(other))


def test_parse_reads_bytes_requests_and_timings():
    result = lh.parse(_report(byte_weight=123_456, requests=7), "tutorial/a.html")
    assert result.bytes == 123_456
    assert result.requests == 7
    assert result.metrics["lcp"] == 2500.0
    assert result.benchmark_index == 1500.0
    assert result.scores["performance"] == pytest.approx((35 * 0.95 + 65) / 100)
    # Opportunities (weight 0) are advice, not a failed audit of the score.
    assert result.failed_audits["performance"] == [
        "first-contentful-paint",
        "largest-contentful-paint",
    ]


def test_a_page_lighthouse_could_not_load_is_an_error_naming_it():
    report = _report()
    report["runtimeError"] = {"code": "NO_FCP", "message": "The page did not paint"}
    with pytest.raises(RuntimeError, match=r"could not audit index\.html: NO_FCP"):
        lh.parse(report, "index.html")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"perf": 0.0},
            "performance 0.65 < 0.90 (first-contentful-paint, largest-contentful-paint)",
        ),
        ({"a11y": 0.0}, "accessibility 0.59 < 1.00 (color-contrast)"),
        ({"best": 0.0}, "best-practices 0.00 < 1.00 (errors-in-console)"),
        ({"seo_crawlable": 0.0}, "seo 0.20 < 1.00 (is-crawlable)"),
        ({"byte_weight": 1_000_001}, "1000 kB transferred > 1000 kB"),
    ],
)
def test_each_part_of_the_budget_fails_on_its_own(change, expected):
    assert lh.over_budget(lh.parse(_report(), "index.html")) == []
    problems = lh.over_budget(lh.parse(_report(**change), "index.html"))
    assert len(problems) == 1
    assert problems[0] == f"index.html: {expected}"


def _with_scores(result: lh.Result, **scores: float) -> lh.Result:
    return dataclasses.replace(result, scores={**result.scores, **scores})


def test_exactly_at_the_budget_passes():
    at = _with_scores(lh.parse(_report(), "a.html"), performance=0.9)
    assert lh.over_budget(at) == []
    below = _with_scores(at, performance=0.89)
    assert lh.over_budget(below) != []


def test_median_run_takes_the_middle_score_and_keeps_every_score():
    runs = [_with_scores(lh.parse(_report(), "a.html"), performance=p) for p in (0.93, 0.85, 0.91)]
    median = lh.median_run(runs)
    assert median.scores["performance"] == 0.91
    assert median.runs == 3
    assert median.performance_runs == (0.93, 0.85, 0.91)
    with pytest.raises(ValueError, match="no Lighthouse run"):
        lh.median_run([])


def _report_scoring(performance: float) -> dict:
    """A report whose performance score is ``performance`` (every weighed audit scores it)."""
    report = _report()
    weighed = ("first-contentful-paint", "largest-contentful-paint", "total-blocking-time")
    for audit in (*weighed, "cumulative-layout-shift", "speed-index"):
        report["audits"][audit]["score"] = performance
    return report


def _audit(tmp_path, scores):
    """audit_page on a runner that returns the given performance scores in turn, and the
    reports it asked for."""
    calls: list[str] = []

    def run(url, page, output):
        calls.append(output.name)
        return _report_scoring(scores[len(calls) - 1])

    return lh.audit_page("tutorial/b.html", "http://x/", tmp_path, run), calls


def test_a_page_clear_of_the_threshold_is_run_once(tmp_path):
    clear, calls = _audit(tmp_path, [1.0])
    assert calls == ["tutorial__b.1.json"]
    assert clear.runs == 1


@pytest.mark.parametrize(
    ("scores", "runs"),
    [
        ((0.92, 0.95, 0.91), 3),  # three within: the median of five is within, whatever follows
        ((0.6, 0.5, 0.7), 3),  # three under
        ((0.89, 0.94, 0.92, 0.96), 4),
        ((0.6, 1.0, 0.7, 0.95, 0.5), 5),
        ((0.76, 0.94, 0.92, 0.86, 0.91), 5),
    ],
)
def test_a_page_near_the_threshold_runs_until_the_median_of_five_is_decided(tmp_path, scores, runs):
    near, calls = _audit(tmp_path, [*scores, *[0.0] * (lh.RUNS_NEAR_THRESHOLD - len(scores))])
    assert calls == [f"tutorial__b.{n}.json" for n in range(1, runs + 1)]
    assert near.runs == runs
    assert near.performance_runs == pytest.approx(scores)
    # The verdict of five runs, whatever the runs not taken would have scored: the median of
    # five computed here with the missing runs at 0 and at 1.
    for filler in (0.0, 1.0):
        five = sorted([*scores, *[filler] * (lh.RUNS_NEAR_THRESHOLD - runs)])
        assert (five[2] >= 0.9) == lh.within_budget(near.scores["performance"], "performance")
    assert near.scores["performance"] == pytest.approx(sorted(scores)[(runs - 1) // 2])
    assert (lh.over_budget(near) == []) == (sorted(scores)[(runs - 1) // 2] >= 0.9)


def test_the_report_lists_every_page_and_says_whether_the_budget_holds():
    good = lh.parse(_report(), "index.html")
    bad = lh.parse(_report(byte_weight=2_000_000), "tutorial/a.html")
    text = lh.report_markdown([good, bad], 125.0, "12.8.2")
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0] for row in rows[1:]] == ["| index.html", "| tutorial/a.html"]
    assert "| 2000 |" in rows[2]
    assert "2.1 min" in text
    assert "**Over budget:**" in text
    assert "tutorial/a.html: 2000 kB transferred" in text
    assert "Within budget" in lh.report_markdown([good], 60.0, "12.8.2")


def test_lighthouse_runs_the_mobile_preset_with_simulated_throttling(tmp_path):
    command = lh.lighthouse_command("http://127.0.0.1:1/x/", tmp_path / "r.json")
    assert "--form-factor=mobile" in command
    assert "--throttling-method=simulate" in command
    flags = next(c for c in command if c.startswith("--chrome-flags="))
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu"):
        assert flag in flags.split("=", 1)[1].split()
    assert "--only-categories=performance,accessibility,best-practices,seo" in command
    assert "--throttling.cpuSlowdownMultiplier=4" in command  # Lighthouse's own default
    slower = lh.lighthouse_command("http://127.0.0.1:1/x/", tmp_path / "r.json", slowdown=2.93)
    assert "--throttling.cpuSlowdownMultiplier=2.93" in slower


def test_the_workers_run_the_same_settings_as_the_command():
    flags = lh.lighthouse_flags(2.93)
    command = lh.lighthouse_command("http://127.0.0.1:1/x/", Path("r.json"), slowdown=2.93)
    assert f"--only-categories={','.join(flags['onlyCategories'])}" in command
    assert f"--form-factor={flags['formFactor']}" in command
    assert f"--throttling-method={flags['throttlingMethod']}" in command
    assert "--throttling.cpuSlowdownMultiplier=2.93" in command
    assert flags["throttling"] == {"cpuSlowdownMultiplier": 2.93}
    assert f"--max-wait-for-load={flags['maxWaitForLoad']}" in command
    assert flags["disableFullPageScreenshot"] is True
    assert "--disable-full-page-screenshot" in command


class _FakeWorker:
    """A worker whose runs fail while ``failures`` lasts, then return a report."""

    made: ClassVar[list[_FakeWorker]] = []

    def __init__(self, failures: list[str]) -> None:
        self.failures = failures
        self.runs: list[tuple[str, dict]] = []
        self.closed = False
        _FakeWorker.made.append(self)

    def run(self, url, output, flags, timeout):
        self.runs.append((url, flags))
        if self.failures:
            raise lh.LighthouseError(self.failures.pop(0))
        return _report()

    def close(self):
        self.closed = True


def test_workers_run_on_one_worker_and_replace_one_that_failed(tmp_path):
    _FakeWorker.made = []
    failures = ["Chromium crashed"]
    with lh.Workers(1, make=lambda: _FakeWorker(failures)) as workers:
        run = workers.runner(slowdown=2.5)
        assert run("http://x/a.html", "a.html", tmp_path / "a.json") == _report()
        first, second = _FakeWorker.made
        assert first.closed  # the failed one was replaced
        assert not second.closed
        assert first.runs == second.runs == [("http://x/a.html", lh.lighthouse_flags(2.5))]
        run("http://x/b.html", "b.html", tmp_path / "b.json")
        assert len(_FakeWorker.made) == 2  # the same worker again
        assert len(second.runs) == 2
    assert all(w.closed for w in _FakeWorker.made)


def test_a_run_that_fails_twice_names_the_page_and_the_error(tmp_path):
    _FakeWorker.made = []
    failures = ["first", "no answer from Lighthouse in 300 s"]
    with (
        lh.Workers(2, make=lambda: _FakeWorker(failures)) as workers,
        pytest.raises(lh.LighthouseError, match=r"failed twice on a\.html:\n.*no answer"),
    ):
        workers.runner(slowdown=4)("http://x/a.html", "a.html", tmp_path / "a.json")


def test_a_missing_node_is_named(monkeypatch):
    monkeypatch.setattr(lh.shutil, "which", lambda name: None)
    with pytest.raises(lh.LighthouseError, match="node is not on PATH"):
        lh.Worker()


def test_the_cpu_slowdown_follows_lighthouses_recommendations_by_host():
    # docs/throttling.md: 4x from a high-end desktop (1500 to 2000), 2x from a low-end one
    # (1000 to 1500), higher at the top of a bracket and lower at its bottom
    assert lh.cpu_slowdown(1750) == lh.cpu_slowdown(2400) == 4.0
    assert lh.cpu_slowdown(1250) == 2.0
    assert lh.cpu_slowdown(1500) == 3.0
    assert lh.cpu_slowdown(1100) == pytest.approx(1.4)
    assert 1.0 < lh.cpu_slowdown(1010) < lh.cpu_slowdown(1490) < 4.0  # grows with the index
    assert lh.cpu_slowdown(900) == lh.cpu_slowdown(100) == 1.0  # never faster than the host
    assert lh.cpu_slowdown(None) == lh.cpu_slowdown(0) == 4.0  # no index read: the default


def test_calibration_takes_the_median_index_of_the_404_page(tmp_path):
    calls = []

    def run(url, page, output):
        calls.append((url, page, output.name))
        return {"environment": {"benchmarkIndex": {1: 1000, 2: 1200, 3: 3000}[len(calls)]}}

    index, slowdown = lh.calibrate("http://x/", tmp_path, jobs=1, runner=run)
    assert [c[1] for c in calls] == ["404.html"] * 3
    assert index == 1200
    assert slowdown == lh.cpu_slowdown(1200)
    calls.clear()
    index, slowdown = lh.calibrate("http://x/", tmp_path, jobs=1, runner=lambda *a: {})
    assert (index, slowdown) == (None, 4.0)


def test_the_report_names_the_cpu_slowdown_and_why():
    text = lh.report_markdown([lh.parse(_report(), "index.html")], 60.0, "12.8.2", 2.5, "because")
    assert "CPU slowdown 2.5x: because." in text


# --- The loopback server --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("gzip, deflate, br", True),
        ("br;q=1.0, gzip;q=0.5", True),
        ("gzip;q=0", False),
        ("identity", False),
        ("*", True),
        (None, False),
    ],
)
def test_accepts_gzip(header, expected):
    assert accepts_gzip(header) is expected


def test_site_relative():
    assert site_relative("/guide/a/b.html?q=1#x", "/guide/") == "/a/b.html"
    assert site_relative("/guide/", "/guide/") == "/"
    assert site_relative("/other/b.html", "/guide/") is None


def _get(url: str, gzip_ok: bool) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"} if gzip_ok else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_server_compresses_text_under_the_hosted_path_and_serves_the_404_page(tmp_path):
    (tmp_path / "index.html").write_text("<p>home</p>" * 100, encoding="utf-8")
    (tmp_path / "404.html").write_text("<title>Not found</title>", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "index.html").write_text("<p>sub</p>", encoding="utf-8")
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 200
    (tmp_path / "plot.png").write_bytes(png)
    with serve(tmp_path, "/guide/", compress=True) as origin:
        status, headers, body = _get(origin + "/guide/index.html", gzip_ok=True)
        assert status == 200
        assert headers["Content-Encoding"] == "gzip"
        assert gzip.decompress(body) == (tmp_path / "index.html").read_bytes()
        assert int(headers["Content-Length"]) == len(body) < 1100

        status, headers, body = _get(origin + "/guide/index.html", gzip_ok=False)
        assert "Content-Encoding" not in headers
        assert body == (tmp_path / "index.html").read_bytes()

        status, headers, body = _get(origin + "/guide/plot.png", gzip_ok=True)
        assert "Content-Encoding" not in headers  # compressed formats go as they are
        assert body == png

        status, _, body = _get(origin + "/guide/sub/", gzip_ok=True)
        assert (status, gzip.decompress(body)) == (200, b"<p>sub</p>")

        for missing in ("/guide/no/such/page.html", "/index.html"):
            status, _, body = _get(origin + missing, gzip_ok=True)
            assert (status, body) == (404, b"<title>Not found</title>"), missing

    with serve(tmp_path, "/guide/") as origin:  # uncompressed, as the browser tests use it
        _, headers, body = _get(origin + "/guide/index.html", gzip_ok=True)
        assert "Content-Encoding" not in headers


# --- docs/_ext/performance.py: math ---------------------------------------------------------------


def test_math_becomes_mathml_with_the_tex_kept():
    mathml = performance.tex_to_mathml(r"\bar y \mapsto \bar y \cos x")
    assert mathml.startswith('<math alttext="\\bar y \\mapsto \\bar y \\cos x" ')
    assert 'display="inline"' in mathml
    assert "<script" not in mathml
    # A thin space after the function name (TeX's \cos x), none before a bracket.
    assert '<mi>cos</mi><mspace width="0.1667em"></mspace><mi>x</mi>' in mathml
    assert "<mspace" not in performance.tex_to_mathml(r"\sin(W x)")
    # \bar as a bar over its letter (drawn by Chromium without a math font; checked by eye).
    assert mathml.count('<mover><mi>y</mi><mo stretchy="true">&#x000AF;</mo></mover>') == 2
    block = performance.tex_to_mathml(r"a < b", display="block")
    assert 'display="block"' in block
    assert 'alttext="a &lt; b"' in block


@pytest.mark.parametrize(
    ("tex", "reason"),
    [
        (r"\mapto x", r"no such TeX command \\mapto"),
        (r"x^", "MissingSuperScriptOrSubscriptError"),
        (r"\begin{foo} x", "MissingEndError"),
    ],
)
def test_tex_that_cannot_be_converted_is_an_error_naming_it(tex, reason):
    with pytest.raises(performance.MathError, match=re.escape(f"cannot convert {tex!r}")) as info:
        performance.tex_to_mathml(tex)
    assert re.search(reason, str(info.value))


# --- docs/_ext/performance.py: scripts ------------------------------------------------------------

HEAD = """<!DOCTYPE html><html><head>
<script data-cfasync="false">document.documentElement.dataset.mode = "auto";</script>
<link rel="stylesheet" href="a.css" />
<script src="_static/documentation_options.js?v=1"></script>
<script src="_static/doctools.js"></script>
<script defer src="_static/already.js"></script>
<script async src="_static/counter.js"></script>
<script type="application/json" id="data">{"a": 1}</script>
<script>DOCUMENTATION_OPTIONS.pagename = 'index';</script>
<script type="text/javascript">DOCUMENTATION_OPTIONS.x = 1;</script>
</head><body><script src="_static/in-body.js"></script><script>inline()</script></body></html>"""


def test_head_scripts_are_deferred_in_order():
    page = performance.defer_head_scripts(HEAD)
    head, body = page.split("</head>")
    # The colour-mode snippet comes first and still runs before the first paint.
    assert '<script data-cfasync="false">document.documentElement' in head
    assert '<script defer src="_static/documentation_options.js?v=1"></script>' in head
    assert '<script defer src="_static/doctools.js"></script>' in head
    assert head.count("defer") == 3  # the one already deferred keeps its single attribute
    assert '<script async src="_static/counter.js"></script>' in head
    assert '<script type="application/json" id="data">' in head
    assert "<script type=\"module\">DOCUMENTATION_OPTIONS.pagename = 'index';</script>" in head
    assert '<script type="module">DOCUMENTATION_OPTIONS.x = 1;</script>' in head
    # Every script that ran before the first paint and is not the colour-mode snippet is gone.
    blocking = [
        tag
        for tag in re.findall(r"<script\b[^>]*>", head)
        if not re.search(r"\b(defer|async)\b|type=\"(module|application/json)\"", tag)
    ]
    assert blocking == ['<script data-cfasync="false">']
    assert body == HEAD.split("</head>")[1]  # the body's scripts run where they are
    assert performance.defer_head_scripts(page) == page


def test_a_stylesheet_import_is_replaced_by_its_rules(tmp_path):
    styles = tmp_path / "_static" / "styles"
    styles.mkdir(parents=True)
    (tmp_path / "_static" / "basic.css").write_text(
        'div.a { background: url("file.png") } div.b { background: url(data:x) }\n',
        encoding="utf-8",
    )
    (tmp_path / "_static" / "nested.css").write_text('@import "basic.css";\n', encoding="utf-8")
    theme = styles / "theme.css"
    css = (
        '@import "../basic.css";\n@import url(https://example.org/x.css);\n'
        '@import "../nested.css";\n@import "../missing.css";\n'
    )
    done = performance.inline_css_imports(css, theme)
    assert '@import "../basic.css"' not in done
    assert 'div.a { background: url("../file.png") }' in done  # relative to its new place
    assert "url(data:x)" in done
    # Another site's sheet, a sheet that imports again, a missing file: left as they were.
    for kept in ("@import url(https://example.org/x.css);", '@import "../nested.css";'):
        assert kept in done
    assert '@import "../missing.css";' in done
    assert performance.inline_css_imports(done, theme) == done


SEARCH_HEAD = """<head>
    <script>DOCUMENTATION_OPTIONS.search_as_you_type = {flag};</script>
    <script src="../_static/doctools.js?v=1"></script>
    <script src="../_static/searchtools.js"></script>
    <script src="../_static/language_data.js"></script>
    <script src="../searchindex.js"></script>
</head>"""


def test_search_scripts_stay_only_where_they_can_run():
    off = SEARCH_HEAD.format(flag="false")
    done = performance.drop_unused_search(off, "tutorial/a.html")
    assert re.findall(r'src="([^"]+)"', done) == ["../_static/doctools.js?v=1"]
    assert performance.drop_unused_search(done, "tutorial/a.html") == done
    assert performance.drop_unused_search(off, "search.html") == off
    on = SEARCH_HEAD.format(flag="true")  # search-as-you-type needs them on every page
    assert performance.drop_unused_search(on, "tutorial/a.html") == on


# --- docs/_ext/performance.py: icons --------------------------------------------------------------


def test_css_strings_are_decoded():
    assert performance.css_string(r"\f09b") == "\uf09b"
    assert performance.css_string(r"\30 ") == "0"
    assert performance.css_string(r"\!") == "!"
    assert performance.css_string("A") == "A"


def test_icon_rules_of_unused_icons_go():
    css = (
        ".fa-solid{font-weight:900}"
        '.fa-github{--fa:"\\f09b"}'
        '.fa-twitter{--fa:"\\f099"}'
        '.fa-add,.fa-plus{--fa:"\\+"}'
        '.fa-0{--fa:"\\30 "}'
        ':root{--pst-icon-bell:"\uf0f3"}'
    )
    trimmed, drawn = performance.trim_icon_rules(css, {"fa-solid", "fa-github", "fa-plus"})
    assert trimmed == (
        '.fa-solid{font-weight:900}.fa-github{--fa:"\\f09b"}.fa-add,.fa-plus{--fa:"\\+"}'
        ':root{--pst-icon-bell:"\uf0f3"}'
    )
    assert drawn == {"\uf09b", "+"}
    assert performance.trim_icon_rules(trimmed, {"fa-solid", "fa-github", "fa-plus"})[0] == trimmed


def _theme_font(name: str) -> Path:
    theme = pytest.importorskip("pydata_sphinx_theme", reason="needs the docs group")
    found = list(Path(theme.__file__).parent.rglob(name))
    if not found:
        pytest.skip(f"pydata-sphinx-theme ships no {name}")
    return found[0]


def test_a_font_keeps_only_the_glyphs_asked_for(tmp_path):
    ttlib = pytest.importorskip("fontTools.ttLib")
    source = _theme_font("fa-brands-400.woff2")
    fonts = []
    for n in (1, 2):
        font = tmp_path / f"{n}.woff2"
        font.write_bytes(source.read_bytes())
        performance.subset_font(font, {"\uf09b"})
        fonts.append(font)
    assert fonts[0].read_bytes()[:4] == b"wOF2"
    assert set(ttlib.TTFont(fonts[0]).getBestCmap()) == {0xF09B}  # the GitHub mark
    assert fonts[0].stat().st_size < source.stat().st_size / 20
    assert fonts[0].read_bytes() == fonts[1].read_bytes(), "two builds, two different fonts"


# --- docs/_ext/performance.py: images -------------------------------------------------------------


def _png(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr
    return b"\x89PNG\r\n\x1a\n" + chunk + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))


@pytest.mark.parametrize(
    ("name", "data", "size"),
    [
        ("a.png", _png(640, 219), (640, 219)),
        ("a.gif", b"GIF89a" + struct.pack("<HH", 31, 7) + b"\x00" * 8, (31, 7)),
        ("a.svg", b'<?xml version="1.0"?>\n<svg width="576pt" height="216pt">', (768, 288)),
        ("b.svg", b'<svg xmlns="x" viewBox="0 0 300.5 150">', (300, 150)),
        ("c.svg", b'<svg width="120px" height="80">', (120, 80)),
        ("d.svg", b'<svg width="50%" height="80">', None),
        (
            "a.jpg",
            b"\xff\xd8\xff\xe0\x00\x04\x00\x00\xff\xc0\x00\x11\x08" + struct.pack(">HH", 90, 160),
            (160, 90),
        ),
        (
            "a.webp",
            b"RIFF\x00\x00\x00\x00WEBPVP8X"
            + b"\x00" * 8
            + (99).to_bytes(3, "little")
            + (49).to_bytes(3, "little"),
            (100, 50),
        ),
        ("a.bin", b"\x00\x01", None),
    ],
)
def test_image_size(tmp_path, name, data, size):
    path = tmp_path / name
    path.write_bytes(data)
    assert performance.image_size(path) == size


def test_output_images_get_their_size_and_load_lazily(tmp_path):
    (tmp_path / "_images").mkdir()
    (tmp_path / "_images" / "p.png").write_bytes(_png(400, 300))
    (tmp_path / "_static").mkdir()
    (tmp_path / "tutorial").mkdir()
    page_file = tmp_path / "tutorial" / "a.html"
    page = (
        '<img src="../_static/logo.svg" class="logo__image" alt="Home"/>\n'
        '<img alt="plot" src="../_images/p.png" />\n'
        '<img src="../_images/missing.png" alt="gone">\n'
        '<img alt="sized" src="../_images/p.png" width="10" height="5" loading="eager" />'
    )
    done = performance.size_images(page, page_file, tmp_path)
    lines = done.splitlines()
    assert lines[0] == '<img src="../_static/logo.svg" class="logo__image" alt="Home"/>'
    assert lines[1] == (
        '<img alt="plot" src="../_images/p.png" width="400" height="300" loading="lazy" '
        'decoding="async" />'
    )
    assert lines[2] == '<img src="../_images/missing.png" alt="gone">'
    assert lines[3] == (
        '<img alt="sized" src="../_images/p.png" width="10" height="5" loading="eager" '
        'decoding="async" />'
    )
    assert performance.size_images(done, page_file, tmp_path) == done


# --- Plots as SVG (examples.tools.runinfo) ------------------------------------------------------


def test_plots_as_svg_only_changes_an_ipython_kernel():
    from examples.tools.runinfo import plots_as_svg

    assert plots_as_svg() is False  # pytest is no IPython shell: nothing to set


@pytest.mark.slow
def test_a_figure_in_ipython_after_the_banner_is_a_compact_reproducible_svg():
    pytest.importorskip("matplotlib")
    pytest.importorskip("IPython")
    script = textwrap.dedent(
        """
        import json
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        from examples.tools.runinfo import plots_as_svg
        assert plots_as_svg()
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 2.5))
        ax.plot([1, 2, 3], [3, 1, 2], marker="o", label="plain chain")
        ax.set_xlabel("chain depth")
        ax.legend()
        data, _ = shell.display_formatter.format(fig)
        print(json.dumps(sorted(data)))
        print(json.dumps(data["image/svg+xml"]))
        """
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "agg", "PATH": "/usr/bin:/bin"},
            timeout=120,
        ).stdout.splitlines()
        for _ in range(2)
    ]
    kinds = json.loads(runs[0][0])
    svg = json.loads(runs[0][1])
    assert "image/svg+xml" in kinds
    assert "image/png" not in kinds
    assert "<text" in svg  # text as text, not a path per glyph
    assert "chain depth" in svg
    assert "<dc:date>" not in svg
    assert performance._svg_size(svg) is not None  # its size can be read for the <img> tag
    assert runs[0][1] == runs[1][1], "two runs wrote different SVG"


# --- The built site -------------------------------------------------------------------------------


def _built_pages() -> list[tuple[str, str]]:
    if not (HTML / "index.html").is_file():
        pytest.skip(f"no built site at {HTML}: build it first (`nox -s docs`)")
    return [(name, (HTML / name).read_text(encoding="utf-8")) for name in pages()]


def test_built_pages_load_no_mathjax_and_show_math_as_mathml():
    with_math = 0
    for name, text in _built_pages():
        scripts = " ".join(re.findall(r"<script\b.*?</script>", text, re.S)).lower()
        assert "mathjax" not in scripts, f"{name} still loads MathJax"
        spans = re.findall(r'<span class="math notranslate nohighlight">(.*?)</span>', text, re.S)
        for span in spans:
            assert span.startswith("<math "), f"{name}: math left as TeX: {span[:80]}"
        with_math += bool(spans)
    assert with_math, "no page has math: the MathML check checks nothing"


def test_built_pages_have_no_render_blocking_script():
    for name, text in _built_pages():
        head = text.split("</head>", 1)[0]
        for tag, body in re.findall(r"(<script\b[^>]*>)(.*?)</script>", head, re.S):
            if re.search(r"\b(defer|async)\b|type=\"(module|application/json)\"", tag):
                continue
            assert "src=" not in tag, f"{name}: {tag} blocks the first paint"
            assert "documentElement.dataset" in body, f"{name}: inline script before paint"


def test_built_stylesheets_import_nothing_from_the_site():
    _built_pages()
    for sheet in (HTML / "_static").rglob("*.css"):
        text = sheet.read_text(encoding="utf-8")
        assert not re.search(r"""@import\s+(url\()?["']?\.""", text), f"{sheet.name} imports"


def test_built_pages_load_the_search_index_only_on_the_search_page():
    for name, text in _built_pages():
        assert "searchindex.js" not in text, f"{name} loads the search index"
    search = (HTML / "search.html").read_text(encoding="utf-8")
    assert "searchindex.js" in search
    assert "searchtools.js" in search


def test_built_fonts_draw_every_icon_the_pages_use():
    ttlib = pytest.importorskip("fontTools.ttLib")
    texts = [text for _, text in _built_pages()]
    texts += [p.read_text(encoding="utf-8") for p in (HTML / "_static").rglob("*.js")]
    used = {name for text in texts for name in re.findall(r"\bfa-[a-z0-9-]+", text)}
    sheet = (HTML / "_static" / "styles" / "pydata-sphinx-theme.css").read_text(encoding="utf-8")
    rules = dict(
        (name.removeprefix("."), performance.css_string(value))
        for names, value in re.findall(
            r'((?:\.fa-[a-z0-9-]+,)*\.fa-[a-z0-9-]+)\{--fa:"([^"]*)"\}', sheet
        )
        for name in names.split(",")
    )
    assert "fa-github" in rules
    assert "fa-magnifying-glass" in rules
    fonts = sorted((HTML / "_static" / "vendor" / "fontawesome" / "webfonts").glob("*.woff2"))
    drawn = set().union(*(ttlib.TTFont(font).getBestCmap() for font in fonts))
    for name in sorted(used & set(rules)):
        assert all(ord(c) in drawn for c in rules[name]), f"no glyph for {name}"
    for font in fonts:
        assert font.stat().st_size < 20_000, f"{font.name}: {font.stat().st_size} bytes"


def test_built_output_images_have_a_size_and_load_lazily():
    images = 0
    for name, text in _built_pages():
        for tag in re.findall(r"<img\b[^>]*>", text):
            if "_images/" not in tag:
                continue
            images += 1
            for attribute in ('width="', 'height="', 'loading="lazy"'):
                assert attribute in tag, f"{name}: {tag} lacks {attribute}"
    assert images, "no page has an output image: the check checks nothing"


def test_built_plots_are_svg_and_small():
    plots = set()
    for name, text in _built_pages():
        for src in re.findall(r'<img\b[^>]*\ssrc="([^"]*_images/[^"]+)"', text):
            plots.add((HTML / name).parent.joinpath(src).resolve())
    assert plots, "no page shows an output image"
    for plot in sorted(plots):
        assert plot.suffix == ".svg", (
            f"{plot.name}: plots are written as SVG (examples.tools.runinfo)"
        )
        gzipped = len(gzip.compress(plot.read_bytes()))
        assert gzipped < 60_000, f"{plot.name}: {gzipped} bytes gzipped"
