"""Each index handler's pure work (`prepare`) a document: what a bulk index's helper process does
for every document of an import or a rebuild (cwa/index/prepare_helper.py).

    python eval/perf/prepare_cost.py [--corpus prose|coding|import] [--documents 1500] [--rounds 3] [--json]

Admits `--documents` documents of a corpus into a temporary archive (semantic retrieval off),
reads them back as the helper does (`load_target`), then times each handler's `prepare` over all
of them, `--rounds` times; reports the best round's microseconds a document per handler. Corpora:
`prose`, the documents `eval/perf/rebuild.py` times (two messages of 200 words, about 1,750
characters each); `coding`, the synthetic coding sessions of `cwa eval perf`; `import`, the turns
`eval/perf/imports.py` writes as transcripts, as admit requests (its prompt, the tool output naming
a file and line on each of 15–180 lines, its answer; the command left out). Run it with `PYTHONPATH` naming a checkout to measure that checkout's handlers.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import orjson

from cwa.api import Archive
from cwa.config import load_settings
from cwa.index.handlers import default_handlers
from cwa.store.derived import load_target
from cwa_eval.retrieval.sessions import lint_turn, prose_turns, synthetic_sessions

QUIET = {"CWA_SEMANTIC_RETRIEVAL": "false", "CWA_DISK_CRITICAL_MEBIBYTES": "0"}
IMPORT_TURNS = 200  # a session's turns in eval/perf/imports.py


def documents(corpus: str, count: int) -> Iterator[dict]:
    if corpus == "prose":
        yield from prose_turns(count)
    elif corpus == "coding":
        yield from islice(synthetic_sessions(10**9, project="/bench/prepare"), count)
    else:
        rng = random.Random(7)
        for number in range(count):
            prompt, _, output, answer = lint_turn(rng, number)
            yield {
                "project": "/bench/prepare",
                "sessionId": f"s{number // IMPORT_TURNS}",
                "kind": "turn",
                "messages": [
                    {"role": "user", "text": prompt},
                    {"role": "toolResult", "toolName": "bash", "text": output},
                    {"role": "assistant", "text": answer},
                ],
            }


def measure(corpus: str, count: int, rounds: int) -> dict:
    settings = load_settings(None, env=QUIET)
    with (
        tempfile.TemporaryDirectory(prefix="cwa-prepare-") as folder,
        Archive.open(Path(folder) / "archive.db", settings=settings) as archive,
    ):
        archive.admit_many(list(documents(corpus, count)))
        rows = archive.conn.execute("SELECT id, kind, byte_length FROM documents ORDER BY id").fetchall()
        loaded = [(kind, load_target(archive.conn, row, kind, length).document) for row, kind, length in rows]
    handlers = [h for h in default_handlers() if hasattr(h, "prepare")]
    best = {h.name: float("inf") for h in handlers}
    for _ in range(rounds):
        for handler in handlers:
            started = time.perf_counter()
            for kind, document in loaded:
                handler.prepare(kind, document)
            best[handler.name] = min(best[handler.name], (time.perf_counter() - started) / len(loaded) * 1e6)
    return {
        "corpus": corpus,
        "documents": len(loaded),
        "textBytesPerDocument": round(sum(len(d.text) for _, d in loaded) / len(loaded)),
        "microsecondsPerDocument": {name: round(us, 1) for name, us in best.items()},
        "total": round(sum(best.values()), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=("prose", "coding", "import"), default="prose")
    parser.add_argument("--documents", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.corpus, args.documents, args.rounds)
    if args.json:
        print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
        return
    costs = ", ".join(f"{name} {us}" for name, us in result["microsecondsPerDocument"].items())
    print(f"{result['corpus']}: {result['documents']} documents, µs a document: {costs}; total {result['total']}")


if __name__ == "__main__":
    main()
