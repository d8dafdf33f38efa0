/*
 * The search page's ranking of sections (docs/_ext/section_search.py writes the index it reads,
 * _static/section_index.js, and explains the scheme). Sphinx inlines this file into
 * language_data.js, which the search page runs after searchtools.js: `Search` exists, and
 * `Stemmer` and `stopwords` are defined just above. Sphinx's own results follow the sections.
 */
"use strict";

const SectionSearch = {
  k1: 1.2,
  b: 0.5,
  // At most this many sections lead the results, each scoring at least this share of the best.
  top: 10,
  share: 0.05,

  words: (query) => {
    const stemmer = new Stemmer();
    const out = (query.match(/[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)+/g) || []).map((w) =>
      w.toLowerCase(),
    );
    splitQuery(query).forEach((raw) => {
      const word = raw.toLowerCase();
      const digits = /^\d+$/.test(word);
      if (stopwords.has(word) || (word.length < 2 && !digits)) return;
      out.push(digits ? word : stemmer.stemWord(word));
    });
    return out;
  },

  rank: (query) => {
    if (typeof SECTION_INDEX === "undefined") return [];
    const index = SECTION_INDEX;
    const n = index.sections.length;
    const unique = [...new Set(SectionSearch.words(query))];
    const scores = new Map();
    const held = new Map();
    unique.forEach((word) => {
      const postings = Object.hasOwn(index.terms, word) ? index.terms[word] : [];
      if (!postings.length) return;
      const idf = Math.log(1 + (n - postings.length + 0.5) / (postings.length + 0.5));
      postings.forEach(([i, body, head]) => {
        const tf = body + index.title * head;
        const norm = 1 - SectionSearch.b + (SectionSearch.b * index.sections[i][3]) / index.mean;
        const add = (idf * tf * (SectionSearch.k1 + 1)) / (tf + SectionSearch.k1 * norm);
        scores.set(i, (scores.get(i) || 0) + add);
        held.set(i, (held.get(i) || 0) + 1);
      });
    });
    const ranked = [...scores].map(([i, score]) => [
      score * index.sections[i][4] * (held.get(i) / unique.length),
      i,
    ]);
    ranked.sort((a, b) => b[0] - a[0]);
    if (!ranked.length) return [];
    const best = ranked[0][0];
    return ranked.filter(([s]) => s >= SectionSearch.share * best).slice(0, SectionSearch.top);
  },
};

if (typeof Search !== "undefined" && !Search._sectionSearch) {
  Search._sectionSearch = true;
  const sphinxSearch = Search._performSearch;
  Search._performSearch = (query, ...rest) => {
    const theirs = sphinxSearch(query, ...rest); // ascending: the page shows the last first
    const index = typeof SECTION_INDEX === "undefined" ? null : SECTION_INDEX;
    if (!index) return theirs;
    const docNames = Search._index.docnames;
    const byDoc = new Map(docNames.map((name, i) => [name, i]));
    const ours = [];
    const seen = new Set();
    SectionSearch.rank(query).forEach(([score, i]) => {
      const [page, anchor, title] = index.sections[i];
      const file = byDoc.get(page);
      if (file === undefined) return;
      const pageTitle = Search._index.titles[file];
      const link = anchor ? "#" + anchor : "";
      seen.add(page + link);
      ours.push([
        page,
        anchor && title !== pageTitle ? `${pageTitle} > ${title}` : pageTitle,
        link,
        null,
        1000 + score,
        Search._index.filenames[file],
        "title",
      ]);
    });
    const rest_ = theirs.filter((r) => !seen.has(r[0] + r[2]));
    return [...rest_, ...ours.reverse()];
  };
}
