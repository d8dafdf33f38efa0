"""The questions page (docs/questions.md) and its data (examples.questions).

Every record names a public thread once, sits under a known topic, and links to an explicit MyST
label that exists on the page it names, before a heading; the page's list is the module's
rendering. Each record's answering section (its MyST source, from the label to the next heading
of the same or a higher level) holds the answer's key terms, so a link to the wrong section
fails.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import re
from pathlib import Path

import pytest

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
    (tmp_path / "a.md").write_text(
        "(good)=\n\n## Title\n\n(bad)=\ntext\n\n(first)=\n(second)=\n## Two labels\n",
        encoding="utf-8",
    )
    (tmp_path / "_skip").mkdir()
    (tmp_path / "_skip" / "b.md").write_text("(hidden)=\n# T\n", encoding="utf-8")
    assert questions.labels(tmp_path) == {"a": {"good", "first", "second"}}
    assert questions.section(tmp_path, "a", "first").startswith("## Two labels")


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


# --- Each link lands on the section that answers it ---------------------------------------------


@pytest.mark.parametrize("q", QUESTIONS, ids=[q.slug for q in QUESTIONS])
def test_the_answering_section_holds_the_answers_key_terms(q):
    # The section, not the page: the MyST source from the label to the next heading of the same
    # or a higher level. A link to a neighbouring section (a label above the wrong heading, say)
    # fails here although the page holds every term.
    assert len(q.terms) >= 2, f"{q.slug}: name at least two key terms of the answer"
    missing = questions.missing_terms(DOCS, q)
    assert missing == [], f"{q.link} lacks {missing}"


SECTIONED = """\
(first)=
## First

text one
```python
# a comment, not a heading
```

### Sub

sub text

(second)=
## Second

text two
"""


def test_section_runs_to_the_next_heading_of_its_level_and_skips_code_comments(tmp_path):
    (tmp_path / "p.md").write_text(SECTIONED, encoding="utf-8")
    first = questions.section(tmp_path, "p", "first")
    assert first.startswith("## First")
    assert "a comment, not a heading" in first
    assert "sub text" in first
    assert "text two" not in first
    assert questions.section(tmp_path, "p", "second").splitlines() == ["## Second", "", "text two"]
    with pytest.raises(LookupError):
        questions.section(tmp_path, "p", "third")


def test_missing_terms_reads_the_section_not_the_page(tmp_path):
    (tmp_path / "p.md").write_text(SECTIONED, encoding="utf-8")
    q = dataclasses.replace(QUESTIONS[0], page="p", label="first", terms=("Text One", "two"))
    assert questions.missing_terms(tmp_path, q) == ["two"]


# --- Behaviours the questions page states that no other page's test covers -----------------------


def test_jax_checkpoint_around_an_nnx_call_that_draws_random_numbers_raises_trace_context_error():
    # google/flax#5053 on the questions page: a module that reaches the checkpoint other than as
    # an argument (a bound method, a closure) is mutated from inside the transform; its random
    # counter is, whenever it draws. nnx.remat, which takes the module as an argument, runs it.
    jax = pytest.importorskip("jax")
    nnx = pytest.importorskip("flax.nnx")
    errors = pytest.importorskip("flax.errors")

    class Layer(nnx.Module):
        def __init__(self, rngs):
            self.linear = nnx.Linear(4, 4, rngs=rngs)
            self.dropout = nnx.Dropout(0.5, rngs=rngs)

        def __call__(self, x):
            return self.dropout(self.linear(x))

    layer = Layer(nnx.Rngs(0))
    x = jax.numpy.ones((2, 4))
    flax_version = tuple(int(p) for p in importlib.metadata.version("flax").split(".")[:2])
    message = None
    try:
        jax.grad(lambda x: jax.checkpoint(lambda x: layer(x).sum())(x))(x)
    except errors.TraceContextError as error:
        message = str(error)
    if message is not None:
        assert "from a different trace level" in message
        assert flax_version >= (0, 11), "flax 0.10.3 let the counter change (the matrix's oldest)"
    else:
        # Measured: flax 0.10.3 (jax 0.5.0) lets the call through and leaves a tracer in the
        # counter, which the next call trips on; 0.12.8 and 0.12.12 raise at once.
        assert flax_version < (0, 12), f"flax {flax_version} no longer raises TraceContextError"
        with pytest.raises(jax.errors.UnexpectedTracerError):
            layer(x)
    loss = nnx.remat(lambda m, x: m(x).sum())(Layer(nnx.Rngs(0)), x)
    assert loss.shape == ()
