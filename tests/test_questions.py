"""The questions page (docs/questions.md) and its data (examples.questions).

Every record names a public thread once, sits under a known topic, and links to an explicit MyST
label that exists on the page it names, before a heading; the page's list is the module's
rendering. On a built site, Sphinx's search finds the answering page for the words of a sample
of the questions: the index's stemmed terms are looked up as ``searchtools.js`` does (a page
matches when it holds every term, in its text or its titles).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from builtsite import HTML

from examples import questions
from examples.questions import QUESTIONS, TOPICS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def test_at_least_fifty_five_distinct_threads():
    sources = [q.source for q in QUESTIONS]
    assert len(sources) >= 55
    assert len(set(sources)) == len(sources), "a thread is listed twice"
    assert len({q.slug for q in QUESTIONS}) == len(QUESTIONS)
    assert len({q.question for q in QUESTIONS}) == len(QUESTIONS)


def test_every_record_is_complete():
    for q in QUESTIONS:
        assert q.topic in TOPICS, q.slug
        assert q.question.strip(), q.slug
        assert q.answer.strip(), q.slug
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", q.repo), q.slug
        assert q.number > 0, q.slug
        assert q.kind in {"issue", "pull"}, q.slug
        assert q.url.startswith("https://github.com/"), q.slug


def test_every_topic_has_questions():
    assert all(questions.by_topic()[topic] for topic in TOPICS)


def test_every_link_target_exists():
    found = questions.labels(DOCS)
    missing = [q.link for q in QUESTIONS if q.label not in found.get(q.page, set())]
    assert missing == [], f"labels missing on their pages: {missing}"


def test_labels_are_unique_across_the_site():
    seen: dict[str, list[str]] = {}
    for page, names in questions.labels(DOCS).items():
        for name in names:
            seen.setdefault(name, []).append(page)
    assert {n: p for n, p in seen.items() if len(p) > 1} == {}


def test_every_answer_is_tested_or_says_why_no_test_can_be():
    for q in QUESTIONS:
        assert (q.checked is None) != (q.unchecked is None), q.slug


def test_every_checked_answer_names_an_existing_test():
    for q in QUESTIONS:
        if q.checked is None:
            continue
        path, _, name = q.checked.partition("::")
        assert (ROOT / path).exists(), q.slug
        if name:
            assert f"def {name}(" in (ROOT / path).read_text(encoding="utf-8"), q.slug


def test_labels_reads_only_labels_before_headings(tmp_path):
    (tmp_path / "a.md").write_text("(good)=\n\n## Title\n\n(bad)=\ntext\n", encoding="utf-8")
    (tmp_path / "_skip").mkdir()
    (tmp_path / "_skip" / "b.md").write_text("(hidden)=\n# T\n", encoding="utf-8")
    assert questions.labels(tmp_path) == {"a": {"good"}}


def test_the_page_shows_the_modules_rendering():
    text = (DOCS / "questions.md").read_text(encoding="utf-8")
    generated = text.split(questions.START, 1)[1].split(questions.END, 1)[0]
    assert generated.strip() == questions.render().strip(), "run `python -m examples.questions`"


def test_the_rendering_links_every_question_to_its_section_and_thread():
    text = questions.render()
    for q in QUESTIONS:
        assert f"{{ref}}`{q.label}`" in text, q.slug
        assert f"]({q.url})" in text, q.slug
    assert text.count("\n## ") + text.startswith("## ") == len(TOPICS)


def test_write_page_replaces_only_the_generated_part(tmp_path):
    page = tmp_path / "q.md"
    page.write_text(
        f"head\n{questions.START}\nSTALE-LIST\n{questions.END}\ntail\n", encoding="utf-8"
    )
    questions.write_page(page)
    text = page.read_text(encoding="utf-8")
    assert text.startswith("head\n")
    assert text.endswith("tail\n")
    assert "STALE-LIST" not in text
    assert questions.render() in text


def test_the_questions_page_is_in_the_root_toctree():
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    assert re.search(r"\nhowto/index\nquestions\n", index)


# --- Sphinx's search, on the built site ----------------------------------------------------------

#: A sample of the questions searched with their key terms (at least 12).
SAMPLE = [q for q in QUESTIONS if q.terms]


def _search_index() -> dict:
    path = HTML / "searchindex.js"
    if not path.is_file():
        pytest.skip(f"no built site at {HTML}: build it first (`nox -s docs`)")
    text = path.read_text(encoding="utf-8")
    return json.loads(text[text.index("(") + 1 : text.rindex(")")])


def _docs_with(index: dict, word: str, stem) -> set[int]:
    """The documents holding ``word`` as searchtools.js looks it up: the stemmed word in the text
    terms or the title terms (a single document is stored as an int, several as a list)."""
    docs: set[int] = set()
    for table in ("terms", "titleterms"):
        for key in {stem(word.lower()), word.lower()}:
            hit = index[table].get(key, [])
            docs |= {hit} if isinstance(hit, int) else set(hit)
    return docs


def test_the_sample_is_large_enough():
    assert len(SAMPLE) >= 12


@pytest.mark.parametrize("q", SAMPLE, ids=[q.slug for q in SAMPLE])
def test_search_finds_the_answering_page(q):
    index = _search_index()
    snowball = pytest.importorskip("snowballstemmer", reason="Sphinx's stemmer (docs group)")
    stem = snowball.stemmer("porter").stemWord
    docs = set(range(len(index["docnames"])))
    for word in q.terms:
        docs &= _docs_with(index, word, stem)
    found = {index["docnames"][d] for d in docs}
    assert q.page in found, f"searching {q.terms} finds {sorted(found)}, not {q.page}"
