"""The explorer's command line: ``python -m examples.explorer``.

Measures every policy (or those named) on a stack of transformer blocks of the chosen size,
prints the table, and with ``--out`` writes the run as JSON for ``src/examples/data/explorer/``.
It never overwrites a file.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

from examples.explorer.data import save
from examples.explorer.model import POLICIES
from examples.explorer.render import results_table
from examples.explorer.run import run
from examples.tools.measure import MIN_REPEATS
from examples.tools.models import SIZES


def _repeats(text: str) -> int:
    value = int(text)
    if value < MIN_REPEATS:
        raise argparse.ArgumentTypeError(
            f"at least {MIN_REPEATS} timed calls are needed for a median and a spread, not {value}"
        )
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m examples.explorer",
        description="Measure every checkpoint policy on a stack of transformer blocks.",
    )
    p.add_argument("--size", choices=sorted(SIZES), default="small")
    p.add_argument("--layers", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--seq", type=int)
    p.add_argument("--width", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--repeats", type=_repeats, default=10, help="timed calls per policy (>= 7)")
    p.add_argument(
        "--policies",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        help="comma-separated names to measure (default: all); see examples.explorer.POLICIES",
    )
    p.add_argument(
        "--depths",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[2, 4, 8, 16],
        help="layer counts of the memory-against-depth sweep (default: 2,4,8,16)",
    )
    p.add_argument("--out", type=Path, help="write the results to this JSON file")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser()
    ns = args.parse_args(argv)
    overrides = {k: getattr(ns, k) for k in ("layers", "batch", "seq", "width", "heads")}
    try:
        cfg = dataclasses.replace(SIZES[ns.size], **{k: v for k, v in overrides.items() if v})
    except ValueError as err:
        args.error(str(err))
    unknown = [n for n in ns.policies or () if n not in POLICIES]
    if unknown:
        args.error(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
    if ns.out is not None and ns.out.exists():
        print(f"{ns.out} exists; not overwriting it (remove it first)", file=sys.stderr)
        return 2
    result = run(cfg, repeats=ns.repeats, layers=ns.depths, policies=ns.policies)
    print(f"# {result.label()}  {cfg}")
    print(results_table(result.results, cfg).to_markdown())
    if ns.out is not None:
        try:
            save(result, ns.out)
        except FileExistsError as err:  # written by someone else while this run measured
            print(err, file=sys.stderr)
            return 2
        print(f"wrote {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
