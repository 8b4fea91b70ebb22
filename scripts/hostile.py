"""The hostile harness from the command line: fuzzed reports, pastes, templates, expectation files,
spec files and command lines; faulty nvidia-smi, NVML and torch stand-ins; signals at random moments
of create, verify and preflight. Prints, per category, how many cases were tried and how many
envkit survived (tests/hostile/harness.py says what "survived" means for each).

    python scripts/hostile.py                  # the default suite's sample
    python scripts/hostile.py --size slow      # the slow suite's large sample (minutes)
    python scripts/hostile.py --count 50 --seed 7 --only "command lines" --only "faults: torch"

Exit status 1 when a case was not survived (the first failures of each category are printed).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `tests` is a package of the repo


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, help="cases per category (default: the --size sample)")
    parser.add_argument("--size", choices=["fast", "slow"], default="fast")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", action="append", help="a category's name (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the categories and their sizes")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    from tests.hostile.harness import categories, run_categories, table

    if args.list:
        for category in categories():
            print(f"{category.name}: fast {category.fast}, slow {category.slow}")
        return 0
    results = run_categories(args.only, size=args.size, count=args.count, seed=args.seed)
    print(f"hostile harness: size {args.size}, count {args.count or 'per category'}, seed {args.seed}")
    print(table(results))
    return 0 if all(r.survived == r.tried for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
