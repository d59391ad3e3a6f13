"""The exact-anchor patterns' leading lookaheads: same matches, and how much faster.

    python eval/perf/anchor_patterns.py [--docs 2000] [--data …/locomo10.json] [--json]

The patterns of cwa/index/exact.py that start with a lookahead (`(?=…)`, after a word boundary
or not) of what every one of their forms needs anyway, `symbol` and `value`, are run with and
without it over the same texts: the message texts of `--docs` synthetic coding documents, this
repository's own source and documentation, 40,000-character runs of regex_scan.py's characters
and pairs (what base64 blobs and progress bars put in tool output: a lookahead that scans must
run at word starts only, or these take quadratic time), and, with `--data`, LoCoMo's turns (read
in place). Reports each pattern's milliseconds both ways, its matches, and whether
they are identical (exit 1 if not).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from regex_scan import UNITS

from cwa.index.exact import _PATTERNS
from cwa.store.serialization import serialize_messages
from cwa_eval.retrieval.sessions import synthetic_sessions

ROOT = Path(__file__).resolve().parents[2]
# The patterns whose leading lookahead only restates what each of their forms needs (`commit`'s
# lookaheads are part of what it matches: a digit and a letter both).
IMPLIED = ("symbol", "value")


def without_lookahead(pattern: re.Pattern[bytes]) -> re.Pattern[bytes] | None:
    """The pattern less its leading lookahead (after a leading `\\b`, if any), or None when it has none."""
    source = pattern.pattern
    boundary = b"\\b" if source.startswith(b"\\b(?=") else b""
    if not source.startswith(boundary + b"(?="):
        return None
    depth, index = 0, len(boundary)
    while True:
        if source[index : index + 1] == b"\\":
            index += 2
            continue
        if source[index : index + 1] == b"(":
            depth += 1
        elif source[index : index + 1] == b")":
            depth -= 1
            if depth == 0:
                return re.compile(boundary + source[index + 1 :], pattern.flags)
        index += 1


def corpora(docs: int, data: Path | None) -> dict[str, list[bytes]]:
    found = {"synthetic coding": []}
    for request in synthetic_sessions(docs):
        document = serialize_messages(request["messages"])
        found["synthetic coding"].extend(document.text[m.text_start : m.end] for m in document.messages)
    found["this repository"] = [
        path.read_bytes()
        for folder in ("cwa", "docs", "eval", "tests")
        for path in sorted((ROOT / folder).rglob("*"))
        if path.suffix in {".py", ".md", ".sql", ".ts", ".json"} and path.is_file()
    ]
    found["long runs"] = [(unit * (40_000 // len(unit))).encode() for unit in UNITS]  # regex_scan.py's
    if data:
        found["LoCoMo turns"] = [
            turn["text"].encode()
            for conversation in orjson.loads(data.read_bytes())
            for turns in conversation["conversation"].values()
            if isinstance(turns, list)
            for turn in turns
            if "text" in turn
        ]
    return found


def spans(pattern: re.Pattern[bytes], texts: list[bytes]) -> tuple[float, list]:
    started = time.perf_counter()
    found = [
        [(m.lastindex, m.start(m.lastindex or 0), m.end(m.lastindex or 0)) for m in pattern.finditer(t)] for t in texts
    ]
    return (time.perf_counter() - started) * 1000, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--data", type=Path, help="locomo10.json: its turns too")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for corpus, texts in corpora(args.docs, args.data).items():
        for name, pattern in _PATTERNS:
            plain = without_lookahead(pattern) if name in IMPLIED else None
            if plain is None:
                continue
            before_ms, before = spans(plain, texts)
            after_ms, after = spans(pattern, texts)
            rows.append(
                {
                    "corpus": corpus,
                    "texts": len(texts),
                    "pattern": name,
                    "withoutMs": round(before_ms, 1),
                    "withMs": round(after_ms, 1),
                    "matches": sum(map(len, after)),
                    "same": before == after,
                }
            )
    if args.json:
        print(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
    else:
        for row in rows:
            print(
                f"{row['corpus']:17s} {row['pattern']:7s} without {row['withoutMs']:7.1f} ms  with {row['withMs']:7.1f} ms  "
                f"{row['matches']:6d} matches  {'same' if row['same'] else 'DIFFERENT'}"
            )
    if not all(row["same"] for row in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
