"""Every regular expression cwa compiles at import, scanned over long runs: linear or not.

    python eval/perf/regex_scan.py [--chars 20000] [--json]

Tool output and pasted text hold runs of hundreds of kilobytes without a space (base64 blobs,
padding, progress bars, CJK text). A pattern that backtracks over the rest of a run from each of
its characters takes quadratic time there and stalls admission or preflight (a lookahead placed
before `symbol`'s word boundary did: docs/performance.md). This finds each compiled pattern held
by a module of cwa (at module level, or in a list, tuple or dict there), runs `finditer` over
runs of `--chars` and twice as many characters of the unit below it scans slowest (found on runs
a quarter as long), and reports the patterns whose longer run takes more than 20 ms, with the
ratio between the two lengths (about 2 when linear, about 4 when quadratic). Exit 1 if a pattern's ratio is over 3 on a run that takes more
than 20 ms. A pattern used only with `fullmatch` (anchored at the start) is quadratic under
`finditer` and linear where it is used: FULLMATCH_ONLY names them, timed on the short runs only.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import cwa

UNITS = ("x", "A", "7", "ab12", "aB", "a.", "a_", "a-", "a/", " ", "-", "'", '"', "`", "\\", ":", "#", "Ab ", "é", "の")
SLOW_MS = 20.0
FULLMATCH_ONLY = {("cwa.index.exact", "_SYMBOL_SEGMENT")}  # name_parts calls it with fullmatch only


def compiled_patterns() -> list[tuple[str, str, re.Pattern]]:
    found = []
    for module in pkgutil.walk_packages(cwa.__path__, "cwa."):
        if module.name.endswith("__main__"):  # runs the command line
            continue
        loaded = importlib.import_module(module.name)
        for name, value in vars(loaded).items():
            items = (
                value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
            )
            for item in items:
                label = f"{name}[{item[0]}]" if isinstance(item, tuple) and item and isinstance(item[0], str) else name
                for candidate in item if isinstance(item, tuple) else (item,):
                    if isinstance(candidate, re.Pattern):
                        found.append((module.name, label, candidate))
    unique: dict[int, tuple[str, str, re.Pattern]] = {}
    for row in found:  # a pattern another module imports is reported once, where it was first found
        unique.setdefault(id(row[2]), row)
    return sorted(unique.values(), key=lambda row: (row[0], row[1]))


def scan_ms(pattern: re.Pattern, unit: str, chars: int) -> float:
    text = unit * (chars // len(unit))
    data = text.encode() if isinstance(pattern.pattern, bytes) else text
    started = time.perf_counter()
    for _ in pattern.finditer(data):
        pass
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=20_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    patterns = compiled_patterns()
    rows = []
    for module, name, pattern in patterns:
        probe = args.chars // 4  # the worst unit, found on short runs
        unit = max(UNITS, key=lambda u: scan_ms(pattern, u, probe))
        chars = probe if (module, name) in FULLMATCH_ONLY else args.chars
        short, long = scan_ms(pattern, unit, chars), scan_ms(pattern, unit, 2 * chars)
        if long > SLOW_MS:
            rows.append(
                {
                    "pattern": f"{module}.{name}",
                    "unit": unit,
                    "chars": chars,
                    "ms": round(short, 1),
                    "msDouble": round(long, 1),
                    "ratio": round(long / max(short, 1e-6), 2),
                    "fullmatchOnly": (module, name) in FULLMATCH_ONLY,
                }
            )
    failed = [r for r in rows if r["ratio"] > 3 and not r["fullmatchOnly"]]
    if args.json:
        print(
            orjson.dumps(
                {"patterns": len(patterns), "slow": rows, "failed": failed}, option=orjson.OPT_INDENT_2
            ).decode()
        )
    else:
        print(f"{len(patterns)} compiled patterns; runs of {args.chars:,} and {2 * args.chars:,} characters")
        for r in rows:
            note = " (fullmatch only where used)" if r["fullmatchOnly"] else ""
            print(
                f"  {r['pattern']}: {r['ms']} -> {r['msDouble']} ms on {r['chars']:,} -> {2 * r['chars']:,} "
                f"of {r['unit']!r}, ratio {r['ratio']}{note}"
            )
        print("every other pattern scans both lengths within 20 ms" if patterns else "no patterns found")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
