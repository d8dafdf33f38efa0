"""examples.tools.prose counts what a reader reads: prose in, code and markup out."""

from __future__ import annotations

import pytest

from examples.tools.prose import ProseStats, count_sentences, prose_stats, prose_units

PAGE = """---
jupytext:
  text_representation:
    extension: .md
---

# A title is not a sentence

(a-label)=
## Nor is a heading

One short sentence. A second, e.g. with an abbreviation, ends here.

```{code-cell} ipython3
x = "Code is not prose. Neither is this."
```

| a table | is not prose |
| --- | --- |

:::{admonition} In short
:class: tip

- A list item without a full stop
- Another with {py:func}`jax.checkpoint` and `inline code` and [a link](https://example.com).
:::

$$
a = b + c. d
$$

<!-- A comment. Not prose either. -->
"""


def test_only_prose_is_kept() -> None:
    assert prose_units(PAGE) == [
        "One short sentence. A second, e.g. with an abbreviation, ends here.",
        "A list item without a full stop",
        "Another with jax.checkpoint and inline_code and a link.",
    ]


def test_words_and_sentences_are_counted_as_read() -> None:
    stats = prose_stats(PAGE)
    # 11 + 7 + 8 words; two sentences in the paragraph, one in each list item.
    assert stats == ProseStats(words=26, sentences=4)
    assert stats.words_per_sentence == pytest.approx(26 / 4)


@pytest.mark.parametrize(
    ("unit", "sentences"),
    [
        ("No full stop at the end", 1),
        ("One. Two! Three?", 3),
        ("Decimals like 1.09 and versions like 0.5.0 do not end one.", 1),
        ("It ends (in brackets.) Then another.", 2),
        ('"A quote ends one." Then more', 2),
    ],
)
def test_sentence_ends(unit: str, sentences: int) -> None:
    assert count_sentences(unit) == sentences


def test_an_empty_page_has_no_sentences() -> None:
    assert prose_stats("") == ProseStats(words=0, sentences=0)
    assert prose_stats("").words_per_sentence == 0.0
