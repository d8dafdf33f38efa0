"""Pages that load fast on a phone (Lighthouse's mobile run; `nox -s lighthouse` measures it).

- **Math is rendered at build time, to MathML** (the pure-Python ``latex2mathml``), which the
  browser lays out itself: no MathJax script (1.2 MB) downloads and typesets on the reader's
  phone, and nothing moves when it would have finished. The TeX source stays in each
  ``<math alttext>``. A formula that cannot be converted is a build warning naming its page.
- **Scripts in ``<head>`` do not hold up the first paint.** Every external script there is
  deferred (it then runs after parsing, in document order, before ``DOMContentLoaded``, which is
  when the theme, search, copy buttons and dropdowns set themselves up); an inline script that
  follows a deferred one becomes a module script, which the browser defers in the same order,
  so that e.g. ``DOCUMENTATION_OPTIONS.pagename = ...`` still runs after the file defining
  ``DOCUMENTATION_OPTIONS``. The theme's colour-mode snippet, which comes first, stays as it is
  (it must run before the first paint).
- **Search scripts only where they run**: the theme loads Sphinx's search index and tools on
  every page, for a search-as-you-type this site leaves off; only search.html keeps them.
- **No stylesheet waits for another**: the theme's ``@import`` of Sphinx's basic.css is replaced
  by its rules, which saves a round trip before the first paint.
- **Only the icons in use**: of Font Awesome's 2,000 icons, the theme's stylesheet keeps the rules
  and its fonts the glyphs of those the pages show (a few kilobytes instead of about 225 kB).
- **Images from cell outputs carry their size** (``width``/``height`` from the file, so the page
  does not shift when they arrive) and load lazily (``loading="lazy"``, ``decoding="async"``).

All but the first rewrite the written files when the build finishes; each step is idempotent, so
pages left from an earlier incremental build pass through unchanged.
"""

from __future__ import annotations

import html
import re
import struct
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.locale import _
from sphinx.util import logging
from sphinx.util.math import get_node_equation_number

logger = logging.getLogger(__name__)

# --- Math as MathML -------------------------------------------------------------------------------

# TeX's function names, which TeX follows with a thin space unless a bracket comes next.
_FUNCTION = re.compile(
    r"(<mi>(?:sin|cos|tan|exp|log|ln|max|min|arg|sup|inf|det|dim|ker|tanh|sinh|cosh)</mi>)"
    r"(?!<mo stretchy=\"false\">&#x00028;)(?!<mo>&#x00028;)"
)


class MathError(ValueError):
    """A formula that latex2mathml cannot convert."""


def tex_to_mathml(latex: str, display: str = "inline") -> str:
    """One formula as a ``<math>`` element (``display`` "inline" or "block").

    latex2mathml writes TeX's structure; one touch makes browsers set it the way TeX would: the
    thin space after a function name (``\\cos x``). A command it does not know (which it would
    print as text) or TeX it cannot parse is a :class:`MathError`.
    """
    from latex2mathml.converter import convert

    try:
        mathml = convert(latex, display=display)
    except Exception as error:  # latex2mathml raises several types for TeX it does not know
        reason = str(error) or type(error).__name__
        raise MathError(f"cannot convert {latex!r} to MathML: {reason}") from error
    # latex2mathml writes a command it does not know as the text of a token: \\mapto -> <mi>.
    unknown = [m[1] for m in re.findall(r"<(mi|mo|mn|mtext)\b[^>]*>(\\[A-Za-z]+)</\1>", mathml)]
    if unknown:
        raise MathError(
            f"cannot convert {latex!r} to MathML: no such TeX command {', '.join(unknown)}"
        )
    mathml = _FUNCTION.sub(r'\1<mspace width="0.1667em"></mspace>', mathml)
    alt = html.escape(latex.strip(), quote=True)
    return mathml.replace("<math ", f'<math alttext="{alt}" ', 1)


def _convert_or_warn(self, node: nodes.Element, latex: str, display: str) -> str:
    try:
        return tex_to_mathml(latex, display)
    except MathError as error:
        logger.warning("%s", error, location=node, type="remat", subtype="math")
        return f'<code class="math-error">{html.escape(latex)}</code>'


def visit_math(self, node: nodes.math) -> None:
    self.body.append(self.starttag(node, "span", "", CLASS="math notranslate nohighlight"))
    self.body.append(_convert_or_warn(self, node, node.astext(), "inline"))
    self.body.append("</span>")
    raise nodes.SkipNode


def visit_displaymath(self, node: nodes.math_block) -> None:
    self.body.append(self.starttag(node, "div", CLASS="math notranslate nohighlight"))
    if node["number"]:
        number = get_node_equation_number(self, node)
        self.body.append(f'<span class="eqno">({number})')
        self.add_permalink_ref(node, _("Link to this equation"))
        self.body.append("</span>")
    # Sphinx's convention: equations separated by a blank line are displayed one under another.
    for part in (p for p in node.astext().split("\n\n") if p.strip()):
        self.body.append(_convert_or_warn(self, node, part, "block"))
    self.body.append("</div>\n")
    raise nodes.SkipNode


# --- Scripts that wait for the page ---------------------------------------------------------------

_HEAD = re.compile(r"<head>.*?</head>", re.S)
_SCRIPT = re.compile(r"<script\b(?P<attrs>[^>]*)>(?P<body>.*?)</script>", re.S)


def _has(attrs: str, name: str) -> bool:
    return re.search(rf"(?:^|\s){name}(?:\s|=|$)", attrs) is not None


def defer_head_scripts(page: str) -> str:
    """The page with the scripts of its ``<head>`` deferred, in their order (see the module doc).

    External scripts get ``defer``; an inline script after the first deferred one becomes
    ``type="module"`` (deferred, in order). Scripts that are async, modules already, or not
    JavaScript (a JSON block, say) are left alone, and so are inline scripts before the first
    deferred one. Running it twice changes nothing more.
    """
    head = _HEAD.search(page)
    if head is None:
        return page
    deferring = False

    def rewrite(match: re.Match[str]) -> str:
        nonlocal deferring
        attrs, body = match["attrs"], match["body"]
        kind = re.search(r"""\stype=["']?([^"'\s>]+)""", attrs)
        if kind and kind.group(1) not in {"text/javascript", "module"}:
            return match.group(0)
        if kind and kind.group(1) == "module":
            deferring = True  # modules are deferred already
            return match.group(0)
        if _has(attrs, "async"):
            return match.group(0)
        if _has(attrs, "src"):
            deferring = True
            if _has(attrs, "defer"):
                return match.group(0)
            return f"<script defer{attrs}>{body}</script>"
        if deferring and body.strip():
            attrs = re.sub(r"""\stype=["']?text/javascript["']?""", "", attrs)
            return f'<script type="module"{attrs}>{body}</script>'
        return match.group(0)

    new_head = _SCRIPT.sub(rewrite, head.group(0))
    return page[: head.start()] + new_head + page[head.end() :]


_SEARCH_SCRIPTS = re.compile(
    r"""[ \t]*<script\b[^>]*\ssrc=["'][^"']*(?:_static/searchtools\.js|_static/language_data\.js|"""
    r"""searchindex\.js)[^"']*["'][^>]*>\s*</script>\n?"""
)


def drop_unused_search(page: str, pagename: str) -> str:
    """The page without Sphinx's search scripts, where nothing on it can use them.

    pydata-sphinx-theme loads searchtools.js, language_data.js and searchindex.js (about 25 kB
    gzipped) on every page, for search-as-you-type in its search dialog. With that off (as here:
    the dialog sends the reader to search.html), only the search page runs them. A page that
    turns it on keeps them.
    """
    if pagename == "search.html" or "DOCUMENTATION_OPTIONS.search_as_you_type = false" not in page:
        return page
    return _SEARCH_SCRIPTS.sub("", page)


# --- Images with their size, loaded when scrolled to ----------------------------------------------

_IMG = re.compile(r"<img\b[^>]*?/?>", re.S)
_SRC = re.compile(r"""\ssrc=["']([^"']+)["']""")
_SVG_LENGTH = {"": 1.0, "px": 1.0, "pt": 96 / 72, "in": 96.0, "cm": 96 / 2.54, "mm": 96 / 25.4}


def image_size(path: Path) -> tuple[int, int] | None:
    """(width, height) in CSS pixels of a PNG, JPEG, GIF, WebP or SVG file; None if unknown."""
    data = path.read_bytes()
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return width, height
    if data[:6] in {b"GIF87a", b"GIF89a"}:
        width, height = struct.unpack("<HH", data[6:10])
        return width, height
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp_size(data)
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    if path.suffix == ".svg":
        return _svg_size(data.decode("utf-8", errors="replace"))
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X":
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if marker in {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE}:
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        i += 2 + length
    return None


def _svg_size(text: str) -> tuple[int, int] | None:
    root = re.search(r"<svg\b[^>]*>", text)
    if root is None:
        return None
    tag = root.group(0)
    sizes = []
    for name in ("width", "height"):
        found = re.search(rf"""\s{name}=["']\s*([\d.]+)\s*([a-z]*)\s*["']""", tag)
        if found is None or found.group(2) not in _SVG_LENGTH:
            sizes = []
            break
        sizes.append(round(float(found.group(1)) * _SVG_LENGTH[found.group(2)]))
    if len(sizes) == 2:
        return sizes[0], sizes[1]
    box = re.search(r"""\sviewBox=["']\s*[-\d.]+[\s,]+[-\d.]+[\s,]+([\d.]+)[\s,]+([\d.]+)""", tag)
    if box is not None:
        return round(float(box.group(1))), round(float(box.group(2)))
    return None


def size_images(page: str, page_file: Path, outdir: Path) -> str:
    """The page with each output image (under ``_images/``) sized and loaded lazily.

    Adds ``width`` and ``height`` read from the file (CSS keeps ``height: auto``, so the
    image scales with the column and keeps its proportions), ``loading="lazy"`` and
    ``decoding="async"``; attributes already there are kept. The theme's own images (the logo)
    are left alone.
    """

    def rewrite(match: re.Match[str]) -> str:
        tag = match.group(0)
        src = _SRC.search(tag)
        if src is None or "_images/" not in src.group(1) or "://" in src.group(1):
            return tag
        target = (page_file.parent / html.unescape(src.group(1)).split("?")[0]).resolve()
        if not target.is_file() or outdir.resolve() not in target.parents:
            return tag
        added = []
        size = image_size(target)
        if size is not None and not _has(tag, "width") and not _has(tag, "height"):
            added += [f'width="{size[0]}"', f'height="{size[1]}"']
        if not _has(tag, "loading"):
            added.append('loading="lazy"')
        if not _has(tag, "decoding"):
            added.append('decoding="async"')
        if not added:
            return tag
        end = "/>" if tag.endswith("/>") else ">"
        return tag[: -len(end)].rstrip() + " " + " ".join(added) + " " + end

    return _IMG.sub(rewrite, page)


# --- Stylesheets without a chain of imports -------------------------------------------------------

_IMPORT = re.compile(r"""@import\s+(?:url\()?["']?([^"')\s;]+)["']?\)?\s*;""")
_URL = re.compile(r"""url\(\s*(["']?)([^"')]+)\1\s*\)""")


def inline_css_imports(css: str, css_file: Path) -> str:
    """The stylesheet with each ``@import`` of a local file replaced by that file's rules.

    The theme's first stylesheet (theme.css) is only ``@import "../basic.css"``: the browser
    learns of basic.css after theme.css arrives, one more round trip before the first paint.
    Relative ``url()``s of the imported file are rewritten for its new place. An import of
    another site, or of a file that itself imports or sets ``@charset``, stays as it is.
    """

    def rewrite(match: re.Match[str]) -> str:
        target = match.group(1)
        if "://" in target or target.startswith(("/", "data:")):
            return match.group(0)
        path = (css_file.parent / target).resolve()
        if not path.is_file():
            return match.group(0)
        text = path.read_text(encoding="utf-8")
        if "@import" in text or "@charset" in text:
            return match.group(0)

        def move(url: re.Match[str]) -> str:
            ref = url.group(2)
            if "://" in ref or ref.startswith(("/", "data:", "#")):
                return url.group(0)
            moved = Path(target).parent / ref
            return f'url("{moved.as_posix()}")'

        return f"/* {target}, inlined (docs/_ext/performance.py) */\n" + _URL.sub(move, text)

    return _IMPORT.sub(rewrite, css)


# --- Icons: only those the site shows -------------------------------------------------------------

# One rule per icon in Font Awesome's stylesheet: `.fa-github{--fa:"\f09b"}` (aliases comma-joined).
_ICON_RULE = re.compile(r'((?:\.fa-[a-z0-9-]+,)*\.fa-[a-z0-9-]+)\{--fa:"((?:[^"\\]|\\[^"])*)"\}')
_ICON_NAME = re.compile(r"\bfa-[a-z0-9]+(?:-[a-z0-9]+)*")
_CSS_ESCAPE = re.compile(r"\\([0-9a-fA-F]{1,6})\s?|\\(.)")
_FONT_URL = re.compile(r"@font-face\{[^}]*?src:url\(([^)]+\.woff2)\)[^}]*\}")
_PRIVATE_USE = re.compile("[\ue000-\uf8ff]")


def css_string(value: str) -> str:
    """A CSS string's characters, its escapes decoded (``\\f09b``, ``\\30 ``, ``\\!``)."""
    return _CSS_ESCAPE.sub(lambda m: chr(int(m[1], 16)) if m[1] else m[2], value)


def trim_icon_rules(css: str, used: set[str]) -> tuple[str, set[str]]:
    """The stylesheet without the icon rules of icons no page uses, and the used icons' text.

    ``used`` holds the ``fa-...`` class names found in the pages and scripts; a rule stays when
    any of its names is used. Returns the new stylesheet and the characters the kept rules draw.
    """
    drawn: set[str] = set()

    def keep(match: re.Match[str]) -> str:
        names = {name.removeprefix(".") for name in match[1].split(",")}
        if names & used:
            drawn.update(css_string(match[2]))
            return match.group(0)
        return ""

    return _ICON_RULE.sub(keep, css), drawn


def subset_font(path: Path, text: set[str]) -> None:
    """Rewrite a WOFF2 font in place with only the glyphs for ``text`` (same name, same format).

    The file's timestamp is kept, so that two builds of one commit write the same bytes.
    """
    from fontTools import subset
    from fontTools.ttLib import TTFont

    font = TTFont(path, recalcTimestamp=False)
    options = subset.Options()
    options.flavor = "woff2"
    options.layout_features = []
    options.name_IDs = ["*"]  # the licence and the name stay in the file
    options.notdef_outline = True
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(ord(c) for c in text))
    subsetter.subset(font)
    subset.save_font(font, str(path), options)


def trim_icon_font(outdir: Path) -> None:
    """Font Awesome as the site uses it: its stylesheet's rules and its fonts' glyphs.

    pydata-sphinx-theme ships all 2,000 icons: about 60 kB of rules in the stylesheet that
    blocks the first paint, and 225 kB of fonts (solid, brands) that every page downloads for
    the dozen icons in its header. The icons in use are read from the built pages and the
    theme's scripts (class names such as ``fa-github``) and from the stylesheets (icons drawn
    from CSS, e.g. admonitions'); the rest is dropped from the stylesheet and the fonts.
    """
    sheet = outdir / "_static" / "styles" / "pydata-sphinx-theme.css"
    if not sheet.is_file():
        return
    used: set[str] = set()
    for path in outdir.rglob("*"):
        if path.suffix in {".html", ".js"} and path.is_file():
            used.update(_ICON_NAME.findall(path.read_text(encoding="utf-8", errors="replace")))
    css = sheet.read_text(encoding="utf-8")
    trimmed, drawn = trim_icon_rules(css, used)
    # Icons a stylesheet draws itself (literal characters of the private use area, or escapes
    # outside the icon rules): admonitions, toggles, external links.
    for path in (outdir / "_static").rglob("*.css"):
        text = trimmed if path == sheet else path.read_text(encoding="utf-8")
        text = _ICON_RULE.sub("", text)
        drawn.update(_PRIVATE_USE.findall(css_string(text)))
    if trimmed != css:
        sheet.write_text(trimmed, encoding="utf-8")
    for url in _FONT_URL.findall(trimmed):
        font = (sheet.parent / url).resolve()
        if font.is_file() and outdir.resolve() in font.parents:
            subset_font(font, drawn)


# --- Wiring ---------------------------------------------------------------------------------------


def optimize_page(page: str, page_file: Path, outdir: Path) -> str:
    pagename = page_file.relative_to(outdir).as_posix()
    page = drop_unused_search(page, pagename)
    return size_images(defer_head_scripts(page), page_file, outdir)


def rewrite_pages(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    for page_file in sorted(outdir.rglob("*.html")):
        if page_file.relative_to(outdir).parts[0].startswith("_"):
            continue  # the theme's templates copied to _static, screenshots, reports
        text = page_file.read_text(encoding="utf-8")
        new = optimize_page(text, page_file, outdir)
        if new != text:
            page_file.write_text(new, encoding="utf-8")
    trim_icon_font(outdir)
    for css_file in sorted((outdir / "_static").rglob("*.css")):
        text = css_file.read_text(encoding="utf-8")
        new = inline_css_imports(text, css_file)
        if new != text:
            css_file.write_text(new, encoding="utf-8")


def setup(app: Sphinx) -> dict[str, object]:
    app.add_html_math_renderer(
        "mathml", inline_renderers=(visit_math, None), block_renderers=(visit_displaymath, None)
    )
    app.connect("build-finished", rewrite_pages)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
