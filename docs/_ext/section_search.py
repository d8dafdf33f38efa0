"""Search that ranks sections: what readers paste (an error message, an API name, a version
number, a few words of their task) finds the section that answers it.

Sphinx's own search needs every word on one page, scores a page 5 or 15 whatever how often and
where it holds them, and ties are sorted by title, so common words return most pages in
alphabetical order and an error message never reaches the section that shows it. This extension
adds a second index, of sections: for each section of each page (its own text, code and cell
outputs included, nested sections apart; the text before a page's first section counts as the
page), the stemmed words and how often the section holds them, and its title. It is written to
``_static/section_index.js`` and loaded by the search page only. ``section_search.js``, Sphinx's
``html_search_scorer`` (inlined into ``language_data.js``, which runs after ``searchtools.js``),
ranks the sections by BM25 over those words, title words weighted higher (and the readers' words
for a section that ``search_keywords.toml`` adds to its title), and by the share of the query's
words a section holds; the best sections come first, Sphinx's own results after them.
Offline: one more file of this site, no request elsewhere.

Words are what the search page splits a query into, stemmed and filtered by the same language
object Sphinx's index uses (``Stemmer`` and ``stopwords`` in language_data.js), plus dotted names
and version numbers whole (``jax.checkpoint``, ``0.6.2``), which Sphinx's splitter breaks apart.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections import Counter
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: Dotted names and version numbers, kept whole besides their parts.
DOTTED = re.compile(r"[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)+")
#: Sphinx's splitter (searchtools.js splitQuery): runs of letters, digits and underscores.
WORD = re.compile(r"[^\W]+")
#: How much a word in a section's title counts against one in its text.
TITLE_WEIGHT = 4
#: Pages whose sections point at answers elsewhere (the questions page paraphrases every answer
#: and links it; a problem page is an exercise): their scores count for this share, so that the
#: section that shows the answer comes before them.
PAGE_WEIGHTS = {"questions": 0.6, "problems/": 0.6, "404": 0.0, "genindex": 0.0}
#: Words readers use for a section that its own text does not use (a symptom in the reader's
#: words: "not working", "different gradients"); counted as words of the section's title.
KEYWORDS = Path(__file__).with_name("search_keywords.toml")
#: Text left out: navigation, raw HTML and images carry no words a reader searches for.
SKIP = (nodes.raw, nodes.image, nodes.comment, nodes.substitution_definition)


def words(text: str, stem, stopwords) -> list[str]:
    """The index words of ``text``: each word lower-cased and stemmed (stop words and one-letter
    words dropped, numbers kept), and each dotted name or version number whole."""
    out = [m.group(0).lower() for m in DOTTED.finditer(text)]
    for raw in WORD.findall(text):
        word = raw.lower()
        if word in stopwords or (len(word) < 2 and not word.isdigit()):
            continue
        out.append(word if word.isdigit() else stem(word))
    return out


def _own_text(section: nodes.Element) -> str:
    """The text of a section without its title and without its nested sections."""
    parts: list[str] = []

    def walk(node: nodes.Node) -> None:
        if isinstance(node, (nodes.section, nodes.title, *SKIP)):
            return
        if isinstance(node, nodes.Text):
            parts.append(node.astext())
            return
        for child in node.children:
            walk(child)
        if isinstance(node, (nodes.paragraph, nodes.literal_block, nodes.list_item)):
            parts.append("\n")

    for child in section.children:
        walk(child)
    return " ".join(parts)


def sections_of(doctree: nodes.document) -> list[tuple[str, str, str]]:
    """(anchor, title, own text) of every section of a page; the page's top section has the
    anchor "" (a link to the page itself)."""
    found: list[tuple[str, str, str]] = []
    for section in doctree.findall(nodes.section):
        title = section.next_node(nodes.title)
        top = not isinstance(section.parent, nodes.section)
        anchor = "" if top else (section["ids"][0] if section["ids"] else "")
        found.append((anchor, title.astext() if title else "", _own_text(section)))
    return found


def collect(app: Sphinx, doctree: nodes.document) -> None:
    env = app.env
    if not hasattr(env, "remat_sections"):
        env.remat_sections = {}
    env.remat_sections[env.docname] = sections_of(doctree)


def purge(app: Sphinx, env, docname: str) -> None:
    getattr(env, "remat_sections", {}).pop(docname, None)


def merge(app: Sphinx, env, docnames, other) -> None:
    if not hasattr(env, "remat_sections"):
        env.remat_sections = {}
    for docname in docnames:
        if docname in getattr(other, "remat_sections", {}):
            env.remat_sections[docname] = other.remat_sections[docname]


def page_weight(page: str) -> float:
    """The share of its score a section of ``page`` keeps (:data:`PAGE_WEIGHTS`; 1 elsewhere)."""
    for prefix, weight in PAGE_WEIGHTS.items():
        if page == prefix or (prefix.endswith("/") and page.startswith(prefix)):
            return weight
    return 1.0


def load_keywords(path: Path = KEYWORDS) -> dict[str, list[str]]:
    """The readers' words for sections (``"page#anchor" = [phrases]``, or ``"page"`` for the top
    of a page), from :data:`KEYWORDS`."""
    if not path.is_file():
        return {}
    with path.open("rb") as f:
        return dict(tomllib.load(f).get("sections", {}))


def build_index(
    pages: dict[str, list[tuple[str, str, str]]],
    stem,
    stopwords,
    keywords: dict[str, list[str]] | None = None,
) -> dict:
    """The section index: ``sections`` ([page, anchor, title, length, weight]), ``terms`` (word
    -> [[section, count in text, count in title], ...]), and the mean length. ``keywords`` (by
    "page#anchor") add words to a section's title."""
    keywords = keywords or {}
    sections: list[list] = []
    terms: dict[str, list[list[int]]] = {}
    for page in sorted(pages):
        for anchor, title, text in pages[page]:
            weight = page_weight(page)
            if weight == 0:
                continue
            body = Counter(words(text, stem, stopwords))
            extra = " ".join(keywords.get(f"{page}#{anchor}" if anchor else page, []))
            head = Counter(words(f"{title} {extra}", stem, stopwords))
            if not body and not head:
                continue
            i = len(sections)
            length = sum(body.values()) + TITLE_WEIGHT * sum(head.values())
            sections.append([page, anchor, title, length, weight])
            for word in sorted(set(body) | set(head)):
                terms.setdefault(word, []).append([i, body[word], head[word]])
    mean = sum(s[3] for s in sections) / max(len(sections), 1)
    return {"sections": sections, "terms": terms, "mean": round(mean, 2), "title": TITLE_WEIGHT}


INDEX_FILE = "section_index.js"


def write_index(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    indexer = getattr(app.builder, "indexer", None)
    if indexer is None:  # search off: nothing reads the index
        return
    lang = indexer.lang
    pages = {
        docname: found
        for docname, found in getattr(app.env, "remat_sections", {}).items()
        if docname in app.env.found_docs
    }
    keywords = load_keywords()
    known = {f"{p}#{a}" if a else p for p, found in pages.items() for a, _, _ in found}
    # A section of a page this build has, but not under that anchor: a renamed label. (A small
    # site built from the project's conf.py, as some tests do, lacks the pages: no warning then.)
    missing = {k for k in set(keywords) - known if k.split("#")[0] in app.env.found_docs}
    for key in sorted(missing):
        logger.warning("search_keywords.toml names %s, which is no section of the site", key)
    index = build_index(pages, lang.stem, set(lang.stopwords), keywords)
    out = Path(app.outdir) / "_static" / INDEX_FILE
    text = json.dumps(index, separators=(",", ":"), ensure_ascii=False)
    out.write_text(f"var SECTION_INDEX = {text};\n", encoding="utf-8")


def load_on_search_page(app: Sphinx, pagename: str, templatename, context, doctree) -> None:
    if pagename == "search":
        context["script_files"] = [*context.get("script_files", []), f"_static/{INDEX_FILE}"]


def bm25(index: dict, query_words: list[str], k1: float = 1.2, b: float = 0.5) -> list:
    """The sections ranked for ``query_words`` as section_search.js ranks them (the tests use it
    to check the JavaScript and the index apart from a browser): BM25 with title words counted
    ``index["title"]`` times, times the share of the query's words a section holds, times the
    page's weight. (k1, b and the plain share, not its square, were chosen on the questions page:
    its 64 questions, asked as readers asked them, find their answering section in the first
    three 36 times against 32 with b=0.75 and the share squared; the list of pasted messages
    finds all of its 42 either way.)
    Returns [(score, page, anchor)], best first."""
    n = len(index["sections"])
    scores: dict[int, float] = {}
    held: dict[int, int] = {}
    unique = list(dict.fromkeys(query_words))
    for word in unique:
        postings = index["terms"].get(word, [])
        if not postings:
            continue
        idf = math.log(1 + (n - len(postings) + 0.5) / (len(postings) + 0.5))
        for i, body, head in postings:
            tf = body + index["title"] * head
            norm = 1 - b + b * index["sections"][i][3] / index["mean"]
            scores[i] = scores.get(i, 0.0) + idf * tf * (k1 + 1) / (tf + k1 * norm)
            held[i] = held.get(i, 0) + 1
    ranked = [
        (
            score * index["sections"][i][4] * held[i] / len(unique),
            index["sections"][i][0],
            index["sections"][i][1],
        )
        for i, score in scores.items()
    ]
    return sorted(ranked, key=lambda r: -r[0])


def setup(app: Sphinx) -> dict[str, object]:
    # After remat_site's scrub of machine paths from cell outputs (also on doctree-read).
    app.connect("doctree-read", collect, priority=900)
    app.connect("env-purge-doc", purge)
    app.connect("env-merge-info", merge)
    app.connect("html-page-context", load_on_search_page)
    app.connect("build-finished", write_index)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
