"""What a reader copies from a page runs with the imports that page shows.

A page's visible code cells (every cell not tagged ``remove-cell`` or ``remove-input``) are what a
reader copies into a fresh script. Their dotted names (``jax.ad_checkpoint.print_saved_residuals``,
``jnp.tanh``, ``nn.remat``, ``flax.nnx.Rngs`` ...) must resolve after exactly the imports those
cells make, in the order the page makes them, and without the ``examples`` package, whose own
imports load modules a reader's script would not have (on jax 0.12, ``import jax`` no longer
makes ``jax.ad_checkpoint`` an attribute; a page's cells ran only because ``examples`` had
imported it).

The pages are read statically (``ast``); the names are resolved in one fresh interpreter that
imports ``jax`` once and forks a child per page, so each page starts from the state of a script
that has imported nothing but what it imports (``import jax`` is the first thing any page's JAX
import runs, so the fork changes nothing a page could see; MyST-NB's ``glue`` and IPython's
display, slow to import, are loaded before the fork too, after a check that they load no JAX).
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import subprocess
import symtable
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(?P<body>.*?)^```\s*$", re.S | re.M)
HIDDEN = frozenset({"remove-cell", "remove-input"})
#: Names that, used as the root of a dotted name, mean a module a reader must import: a page that
#: writes ``jnp.sum`` without importing ``jnp`` in a visible cell fails just the same.
MODULE_ALIASES = frozenset(
    {"jax", "jnp", "lax", "np", "numpy", "nn", "nnx", "linen", "flax", "optax", "functools"}
)


@dataclass
class Page:
    """A page's visible code, in order: the imports it makes and the dotted names it uses."""

    name: str
    events: list[dict[str, str]] = field(default_factory=list)
    unbound: list[str] = field(default_factory=list)


def visible_cells(text: str) -> list[str]:
    """The code of each cell a reader sees, magics (``%``, ``!``) dropped."""
    cells = []
    for match in CODE_CELL.finditer(text):
        body = match.group("body")
        tags = re.search(r"^:tags:\s*\[(.*?)\]\s*$", body, re.M)
        names = {t.strip().strip("'\"") for t in tags.group(1).split(",")} if tags else set()
        if names & HIDDEN:
            continue
        lines = [
            line
            for line in body.splitlines()
            if not line.startswith(":") and not line.lstrip().startswith(("%", "!"))
        ]
        cells.append("\n".join(lines))
    return cells


def _chain(node: ast.Attribute) -> list[str] | None:
    parts = [node.attr]
    value = node.value
    while isinstance(value, ast.Attribute):
        parts.append(value.attr)
        value = value.value
    if not isinstance(value, ast.Name):
        return None
    return [value.id, *reversed(parts)]


def _is_examples(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").split(".")[0] == "examples"
    return all(alias.name.split(".")[0] == "examples" for alias in node.names)


def _bound(node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.ImportFrom):
        return {alias.asname or alias.name for alias in node.names}
    return {alias.asname or alias.name.split(".")[0] for alias in node.names}


def read_page(name: str, text: str) -> Page:
    """The imports and dotted names of a page's visible cells, in the order a reader runs them."""
    page = Page(name)
    bound: set[str] = set()
    for number, code in enumerate(visible_cells(text), start=1):
        found: list[tuple[int, int, ast.AST]] = []
        tree = ast.parse(code)
        # an Attribute that is the value of another is part of a longer chain
        inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        for node in ast.walk(tree):
            an_import = isinstance(node, ast.Import | ast.ImportFrom) and not _is_examples(node)
            a_chain = isinstance(node, ast.Attribute) and id(node) not in inner
            if an_import or a_chain:
                found.append((node.lineno, node.col_offset, node))
        for line, _, node in sorted(found, key=lambda f: (f[0], f[1])):
            where = f"visible cell {number}, line {line}"
            if isinstance(node, ast.Import | ast.ImportFrom):
                page.events.append({"import": ast.unparse(node), "where": where})
                bound |= _bound(node)
                continue
            assert isinstance(node, ast.Attribute)
            chain = _chain(node)
            if chain is None:
                continue
            dotted = ".".join(chain)
            if chain[0] in bound:
                page.events.append({"use": dotted, "where": where})
            elif chain[0] in MODULE_ALIASES:
                page.unbound.append(f"{where}: {dotted} ({chain[0]} is not imported before it)")
    return page


#: What IPython's kernel defines besides Python's builtins, which a cell may use unimported.
KERNEL_NAMES = frozenset({"display", "get_ipython"})


def _tables(table: symtable.SymbolTable):
    yield table
    for child in table.get_children():
        yield from _tables(child)


def undefined_names(text: str) -> list[str]:
    """Names the visible cells use that none of them defines: hidden cells' definitions do
    not travel with what a reader copies."""
    top = symtable.symtable("\n".join(visible_cells(text)), "page", "exec")
    defined = {
        s.get_name()
        for s in top.get_symbols()
        if s.is_assigned() or s.is_imported() or s.is_namespace()
    }
    used = {
        s.get_name()
        for table in _tables(top)
        for s in table.get_symbols()
        if s.is_referenced() and (table is top or s.is_global())
    }
    return sorted(n for n in used - defined if not hasattr(builtins, n) and n not in KERNEL_NAMES)


RESOLVER = textwrap.dedent(
    """
    import json, os, sys
    import jax  # every page's first JAX import runs this; forking after it saves its cost
    before = set(sys.modules)
    import IPython.display, myst_nb  # slow to import, used by pages, and they load no JAX
    assert not any(m.split(".")[0] in {"jax", "flax", "optax"} for m in set(sys.modules) - before)

    pages = json.load(sys.stdin)
    report = {}
    for page in pages:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            failures, namespace = [], {}
            for event in page["events"]:
                try:
                    if "import" in event:
                        exec(event["import"], namespace)
                        continue
                    root, *rest = event["use"].split(".")
                    value = namespace[root]
                    for attribute in rest:
                        value = getattr(value, attribute)
                except Exception as error:
                    what = event.get("import") or event["use"]
                    failures.append(f"{event['where']}: {what}: {type(error).__name__}: {error}")
            with os.fdopen(write, "w") as out:
                json.dump(failures, out)
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as got:
            report[page["name"]] = json.load(got)
        os.waitpid(pid, 0)
    json.dump(report, sys.stdout)
    """
)


def resolve(pages: list[Page]) -> dict[str, list[str]]:
    """For each page, the imports or dotted names that fail in a fresh interpreter."""
    for module in ("IPython", "myst_nb"):  # what a page's kernel has; the docs group brings them
        pytest.importorskip(module, reason="needs the docs dependency group (a page's kernel)")
    run = subprocess.run(
        [sys.executable, "-c", RESOLVER],
        input=json.dumps([{"name": p.name, "events": p.events} for p in pages]),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report: dict[str, list[str]] = json.loads(run.stdout)
    for page in pages:
        report[page.name] = page.unbound + report[page.name]
    return report


def _pages() -> list[Path]:
    return sorted(
        p
        for p in DOCS.rglob("*.md")
        if not p.relative_to(DOCS).as_posix().startswith(("_", "jupyter_execute"))
        and CODE_CELL.search(p.read_text(encoding="utf-8"))
    )


def test_every_dotted_name_a_page_shows_resolves_after_its_own_imports():
    pages = [read_page(p.relative_to(DOCS).as_posix(), p.read_text("utf-8")) for p in _pages()]
    assert len(pages) > 20
    assert sum(len(p.events) for p in pages) > 200  # the reader did find the pages' code
    failing = {name: lines for name, lines in resolve(pages).items() if lines}
    assert not failing, "names a reader's fresh script cannot resolve:\n" + "\n".join(
        f"{name}: {line}" for name, lines in failing.items() for line in lines
    )


def test_every_name_a_page_shows_is_defined_by_its_visible_cells():
    missing = {
        p.relative_to(DOCS).as_posix(): names
        for p in _pages()
        if (names := undefined_names(p.read_text("utf-8")))
    }
    assert not missing, f"names used in visible cells but defined only in hidden ones: {missing}"


def _fake(*cells: tuple[str, str]) -> str:
    return "\n".join(f"```{{code-cell}} ipython3\n{tags}{code}\n```\n" for tags, code in cells)


def _probe_fresh(code: str) -> bool:
    """Whether ``code`` runs in a fresh interpreter (what the resolver must agree with)."""
    return (
        subprocess.run([sys.executable, "-c", code], capture_output=True, check=False).returncode
        == 0
    )


def test_the_resolver_finds_what_a_fresh_script_cannot_resolve():
    use = "jax.ad_checkpoint.print_saved_residuals"
    plain = read_page("plain", _fake(("", f"import jax\n{use}")))
    imported = read_page("imported", _fake(("", f"import jax\nimport jax.ad_checkpoint\n{use}")))
    hidden = read_page(
        "hidden",
        _fake((":tags: [remove-cell]\n", "import jax.ad_checkpoint"), ("", f"import jax\n{use}")),
    )
    late = read_page("late", _fake(("", "jnp.tanh"), ("", "import jax.numpy as jnp\njnp.tanh")))
    missing = read_page("missing", _fake(("", "import jax.numpy as jnp\njnp.no_such_function")))
    unbound = read_page("unbound", _fake(("", "import jax\njnp.tanh")))
    examples = read_page(
        "examples", _fake(("", f"import jax\nfrom examples.tools import residuals\n{use}"))
    )
    report = resolve([plain, imported, hidden, late, missing, unbound, examples])
    fresh = _probe_fresh(f"import jax\n{use}")  # True on the releases whose `import jax` loads it
    assert bool(report["plain"]) is not fresh
    assert bool(report["hidden"]) is not fresh  # a hidden cell's import is not the reader's
    assert bool(report["examples"]) is not fresh  # nor is what `examples` happens to load
    assert report["imported"] == []
    assert report["late"] == ["visible cell 1, line 1: jnp.tanh (jnp is not imported before it)"]
    assert report["missing"] == [
        "visible cell 1, line 2: jnp.no_such_function: AttributeError: "
        "module 'jax.numpy' has no attribute 'no_such_function'"
    ]
    assert report["unbound"] == ["visible cell 1, line 2: jnp.tanh (jnp is not imported before it)"]


@pytest.mark.parametrize(
    ("cell", "kept"),
    [("", True), (":tags: [hide-output]\n", True), (":tags: [remove-input]\n", False)],
)
def test_visible_cells_are_those_a_reader_sees(cell, kept):
    assert visible_cells(_fake((cell, "x = 1"))) == (["x = 1"] if kept else [])


def test_undefined_names_are_those_only_a_hidden_cell_defines():
    page = _fake(
        (":tags: [remove-cell]\n", "from examples.notes import remat3\nlabel = 'cpu'"),
        ("", "import jax\ndef f(x):\n    return jax.numpy.sin(x) + here\nprint(remat3, label, f)"),
        ("", "here = 1\ndisplay([i for i in range(3)])"),
    )
    assert undefined_names(page) == ["label", "remat3"]
