"""How many windows are longer than the embedding model's 256 tokens, and how many pieces (vectors)
the semantic index keeps for them, on the corpora the evaluations use.

    python eval/perf/pieces.py [--data …/locomo10.json] [--coding 3000] [--tokens 100000] [--json]

Each corpus is admitted into a temporary archive as its evaluation admits it: LoCoMo's turns
(`cwa eval locomo`), synthetic coding sessions (`cwa eval perf`'s coding corpus, `--coding`
documents) and one long coding history with its facts inside long messages (`cwa eval long
--inside`, `--tokens`). Then every distinct window content is counted as `cwa index embed` would
embed it (cwa/models.py `piece_counts`): windows, the share longer than one piece, vectors a
window and the most pieces any took. Before migration 0029 a window was embedded from its first
piece only. Then one probe: a text of about 300 tokens about a garden followed by a paragraph on a
failed backup, and the question's cosine to its first piece (all a cut at 256 tokens embedded),
to its nearest piece (what a window scores now) and to the mean of its pieces.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa.api import Archive
from cwa.model_variants import active
from cwa.models import embedder
from cwa.store.reads import window_text
from cwa_eval.retrieval import locomo
from cwa_eval.retrieval.long_history import history, project
from cwa_eval.retrieval.sessions import synthetic_sessions

CONTENTS = (
    "SELECT content_hash, document_row, start_byte, end_byte, first_message, last_message FROM windows "
    "GROUP BY content_hash"
)


def counted(admit) -> dict:
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "a.db") as archive:
        admit(archive)
        conn = archive.conn
        texts = [window_text(conn, *row) for _, *row in conn.execute(CONTENTS)]
        pieces = embedder(active(archive.path)).piece_counts(texts)
    return {
        "windows": len(pieces),
        "longerThanOnePiece": round(sum(p > 1 for p in pieces) / len(pieces), 4),
        "vectorsPerWindow": round(sum(pieces) / len(pieces), 4),
        "mostPieces": max(pieces),
    }


# The probe: about 300 tokens on a garden, then the paragraph that answers QUESTION (the tests of
# tests/test_semantic.py embed it too).
GARDEN = " ".join(f"The garden path near house {n} is lined with tulips and roses." for n in range(20))
BACKUP = (
    "The nightly database backup failed because the disk was full. The backup job could not write its "
    "archive to the volume. We freed space on the disk and the backup ran again."
)
QUESTION = "why did the backup job fail? no space left on the volume"


def probe() -> dict:
    model = embedder(active(None))
    question = model.embed([QUESTION])[0]
    pieces, _, _ = model.embed_pieces([GARDEN + " " + BACKUP])
    mean = model.embed([GARDEN + " " + BACKUP])[0]
    return {
        "pieces": len(pieces),
        "firstPiece": round(float(pieces[0] @ question), 3),
        "nearestPiece": round(float((pieces @ question).max()), 3),
        "meanOfPieces": round(float(mean @ question), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument("--coding", type=int, default=3000)
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    def coding(archive: Archive) -> None:
        for document in synthetic_sessions(args.coding):
            archive.admit(document)

    def long_inside(archive: Archive) -> None:
        for document in history(41, args.tokens, 4, inside=True).documents:
            archive.admit({"project": project(0), **document})

    report = {"coding": counted(coding), "longInside": counted(long_inside), "probe": probe()}
    if args.data.is_file():
        report["locomo"] = counted(lambda archive: locomo.ingest(archive, locomo.load(args.data)))
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    for corpus, found in report.items():
        print(f"{corpus:<11} " + "  ".join(f"{k} {v}" for k, v in found.items()))


if __name__ == "__main__":
    main()
