"""The questions readers bring, mined from public trackers, and where the site answers each.

One :class:`Question` per public thread (an issue, a pull request or its review), recorded in
``data/questions.toml``: the question in the words a user would type, the answer the thread
established (or, where ``checked`` names a test, the behaviour the installed JAX shows, asserted
by that test), the section of the site that shows it (a page and an explicit MyST label,
``(label)=`` before a heading), the answer's key terms, which that section (not just its page)
must hold, and the topic it is listed under on ``docs/questions.md``. The page's list is
:func:`render`'s output, kept equal to it by ``tests/test_questions.py`` (``python -m
examples.questions`` rewrites it), so a label that disappears fails the site build, and a record
whose section lacks its key terms (:func:`section`) fails the tests.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path

#: The topics, in the order the page lists them.
TOPICS: tuple[str, ...] = (
    "Memory that did not drop",
    "Steps that got slower",
    "What a policy keeps",
    "Scan and nested scan",
    "Offloading to the host",
    "Sharding and collectives",
    "Static arguments and tracing errors",
    "Callbacks, side effects and randomness",
    "custom_vjp, custom_jvp and other transformations",
    "Numerics",
    "Flax linen and NNX",
    "Other libraries' wrappers",
    "Imports and listings that confused",
)


@dataclasses.dataclass(frozen=True)
class Question:
    """One public thread: the question, its answer, and the section that shows it."""

    slug: str
    topic: str
    question: str
    answer: str
    page: str  # under docs/, without ".md"
    label: str  # the MyST label of the answering section on that page
    repo: str
    number: int
    kind: str = "issue"  # "issue" or "pull"
    #: the test (file::name) that asserts the behaviour on the installed JAX, if one does
    checked: str | None = None
    #: where no test can: why the answer is not a behaviour of the installed JAX (another
    #: project's practice, a thread's state, a GPU's schedule); each question has one of the two
    unchecked: str | None = None
    #: the answer's key terms, each of which the answering section's MyST source holds
    #: (case-insensitive; see :func:`section`)
    terms: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        return f"{self.repo}#{self.number}"

    @property
    def url(self) -> str:
        path = "pull" if self.kind == "pull" else "issues"
        return f"https://github.com/{self.repo}/{path}/{self.number}"

    @property
    def link(self) -> str:
        return f"{self.page}#{self.label}"


DATA = Path(__file__).resolve().parent / "data" / "questions.toml"


def load(path: Path = DATA) -> tuple[Question, ...]:
    """The records of ``path`` (``[[question]]`` tables whose keys are :class:`Question`'s)."""
    with path.open("rb") as f:
        records = tomllib.load(f)["question"]
    return tuple(Question(**{**r, "terms": tuple(r.get("terms", ()))}) for r in records)


QUESTIONS: tuple[Question, ...] = load()


_LABEL = re.compile(r"^\(([A-Za-z0-9_-]+)\)=\s*$")


def labels(docs: Path) -> dict[str, set[str]]:
    """Every explicit MyST label in ``docs`` (``(name)=`` on its own line, followed by a heading,
    perhaps after other labels of the same heading), by page (its path under ``docs`` without
    ``.md``)."""
    found: dict[str, set[str]] = {}
    for path in sorted(docs.rglob("*.md")):
        if any(part.startswith(("_", ".")) for part in path.relative_to(docs).parts):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        page = path.relative_to(docs).with_suffix("").as_posix()
        for i, line in enumerate(lines):
            match = _LABEL.match(line)
            # The first line after it that is neither blank nor another label (two labels may
            # name one heading).
            following = next((x for x in lines[i + 1 :] if x.strip() and not _LABEL.match(x)), "")
            if match and following.startswith("#"):
                found.setdefault(page, set()).add(match.group(1))
    return found


_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_HEADING = re.compile(r"^(#{1,6})\s")


def section(docs: Path, page: str, label: str) -> str:
    """The MyST source of the section that ``(label)=`` opens on ``page``: its heading and every
    line up to the next heading of the same or a higher level (lines in code fences, which may
    start with ``#``, are not headings). Raises ``LookupError`` where the page has no such label.
    """
    lines = (docs / f"{page}.md").read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == f"({label})="]
    if not starts:
        raise LookupError(f"no ({label})= on {page}")
    heading = next(
        (
            i
            for i in range(starts[0] + 1, len(lines))
            if lines[i].strip() and not _LABEL.match(lines[i])
        ),
        None,
    )
    match = None if heading is None else _HEADING.match(lines[heading])
    if heading is None or match is None:
        raise LookupError(f"({label})= on {page} is not followed by a heading")
    level = len(match.group(1))
    out = [lines[heading]]
    fence: str | None = None
    for line in lines[heading + 1 :]:
        opening = _FENCE.match(line)
        if fence is None and opening:
            fence = opening.group(1)
        elif fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and not stripped.strip(fence[0]):
                fence = None
        else:
            found = _HEADING.match(line)
            if found and len(found.group(1)) <= level:
                break
        out.append(line)
    return "\n".join(out)


def missing_terms(docs: Path, q: Question) -> list[str]:
    """The key terms of ``q`` that its answering section does not hold (case-insensitive)."""
    text = section(docs, q.page, q.label).lower()
    return [term for term in q.terms if term.lower() not in text]


def by_topic() -> dict[str, list[Question]]:
    """The questions grouped by topic, topics in :data:`TOPICS` order."""
    return {topic: [q for q in QUESTIONS if q.topic == topic] for topic in TOPICS}


def _anchor(topic: str) -> str:
    return "questions-" + re.sub(r"[^a-z0-9]+", "-", topic.lower()).strip("-")


def render() -> str:
    """The page's list: one section per topic, one bullet per question."""
    out: list[str] = []
    for topic, questions in by_topic().items():
        out += [f"({_anchor(topic)})=", f"## {topic}", ""]
        for q in questions:
            out.append(
                f"- **{q.question}** {q.answer} See {{ref}}`{q.label}`; "
                f"asked in [{q.source}]({q.url})."
            )
        out.append("")
    return "\n".join(out).rstrip() + "\n"


START = "<!-- questions: generated by `python -m examples.questions`; do not edit by hand -->"
END = "<!-- questions: end -->"


def write_page(page: Path) -> None:
    """Replace the generated part of ``page`` (between :data:`START` and :data:`END`)."""
    text = page.read_text(encoding="utf-8")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    page.write_text(f"{head}{START}\n\n{render()}\n{END}{tail}", encoding="utf-8")


if __name__ == "__main__":  # pragma: no cover - rewrites the page
    write_page(Path(__file__).resolve().parents[2] / "docs" / "questions.md")
