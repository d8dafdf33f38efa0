// One Chromium and one Lighthouse for many runs: tests/lighthouse.py starts one of these per page
// audited at once, and sends it one run at a time.
//
//   node tests/lighthouse_worker.mjs LIGHTHOUSE_DIR CHROMIUM FLAGS_JSON
//
// LIGHTHOUSE_DIR is the installed package (node_modules/lighthouse), CHROMIUM the browser, and
// FLAGS_JSON {"chromeFlags": [...]}, the browser's flags. Each line read from standard input is
// one run, {"url": ..., "output": ..., "flags": {...}}, with Lighthouse's flags as its Node API
// takes them (the CLI's flags, camel-cased); the report (JSON) is written to `output`, and one
// line answers on standard output: {"ok": true} or {"ok": false, "error": ...}. The browser is
// launched once, at the start; each run opens a tab of its own and Lighthouse resets the page's
// storage and the browser's cache first, as it does in a browser it launched itself. What the CLI
// pays again for every run (starting Node, loading Lighthouse, launching and closing Chromium)
// is paid once.

import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import {pathToFileURL} from 'node:url';

const [lighthouseDir, chromium, flagsJson] = process.argv.slice(2);
if (!lighthouseDir || !chromium || !flagsJson) {
  console.error('usage: node lighthouse_worker.mjs LIGHTHOUSE_DIR CHROMIUM FLAGS_JSON');
  process.exit(2);
}
const settings = JSON.parse(flagsJson);
const moduleUrl = (relative) => pathToFileURL(path.join(lighthouseDir, relative)).href;
const {default: lighthouse} = await import(moduleUrl('core/index.js'));
// chrome-launcher is Lighthouse's own dependency, installed beside it.
const chromeLauncher = await import(
  pathToFileURL(path.join(lighthouseDir, '..', 'chrome-launcher', 'dist', 'index.js')).href
);

const chrome = await chromeLauncher.launch({
  chromePath: chromium,
  chromeFlags: settings.chromeFlags,
  logLevel: 'silent',
});
// Standard output carries the answers only: anything else logged goes to standard error.
const answer = (value) => process.stdout.write(JSON.stringify(value) + '\n');
console.log = console.info = console.error;
const stop = async () => {
  await chrome.kill();
  process.exit(0);
};
process.on('SIGTERM', stop);

const lines = readline.createInterface({input: process.stdin});
for await (const line of lines) {
  if (!line.trim()) continue;
  try {
    const {url, output, flags} = JSON.parse(line);
    const result = await lighthouse(url, {
      ...flags,
      port: chrome.port,
      output: 'json',
      logLevel: 'error',
    });
    if (!result) throw new Error('Lighthouse returned no result');
    fs.writeFileSync(output, result.report);
    answer({ok: true});
  } catch (error) {
    answer({ok: false, error: String(error && error.stack ? error.stack : error)});
  }
}
await stop();
