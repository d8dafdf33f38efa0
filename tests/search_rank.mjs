// The built site's search, ranked outside a browser (tests/test_search.py runs it with Node).
// Loads the search page's scripts (searchtools.js, language_data.js with the site's scorer, the
// section index, searchindex.js) into one context with the few browser globals they touch, and
// prints, for each query read as JSON from stdin, the links of its first results in the order the
// search page shows them ("page#anchor", or "page" for a page's top).
// Usage: node tests/search_rank.mjs SITE [--sphinx-only] [--top N] < queries.json
import fs from "node:fs";
import path from "node:path";
import vm from "node:vm";

const [site, ...flags] = process.argv.slice(2);
const sphinxOnly = flags.includes("--sphinx-only");
const topAt = flags.indexOf("--top");
const top = topAt >= 0 ? Number(flags[topAt + 1]) : 3;

const context = {
  console,
  document: { getElementById: () => null, addEventListener: () => {}, readyState: "loading" },
  window: {},
  localStorage: { setItem: () => {}, getItem: () => null },
  DOCUMENTATION_OPTIONS: {},
  SPHINX_HIGHLIGHT_ENABLED: false,
  _: (s) => s,
  _ready: () => {}, // doctools.js: run when the page is ready; nothing to run here
};
context.window = context;
vm.createContext(context);
const load = (file) => {
  const full = path.join(site, file);
  if (fs.existsSync(full)) vm.runInContext(fs.readFileSync(full, "utf-8"), context, { filename: file });
};
load("_static/searchtools.js");
load("_static/language_data.js");
// Without the section index, the site's scorer leaves Sphinx's results as they are.
if (!sphinxOnly) load("_static/section_index.js");
// searchindex.js calls Search.setIndex, which runs a queued query if any: none is queued.
load("searchindex.js");

const queries = JSON.parse(fs.readFileSync(0, "utf-8"));
const out = vm.runInContext(
  `(queries, top) => queries.map((q) => {
     const parsed = Search._parseQuery(q);
     const results = Search._performSearch(...parsed);
     return results.slice().reverse().slice(0, top).map((r) => r[0] + r[2]);
   })`,
  context,
)(queries, top);
process.stdout.write(JSON.stringify(out));
