"""A rebuild of an existing archive timed, with lexical search from another process during it and after.

    python eval/perf/rebuild_archive.py COPY [--corpus coding] [--after 100] [--json]

COPY is rebuilt in place: pass a copy (e.g. of the archive `cwa eval perf --keep` built). The
rebuild is `Archive.call("index-rebuild")`, what `cwa --db COPY index rebuild` runs, by the cwa on
PYTHONPATH (a baseline tree) or the installed one. Meanwhile a second process searches the
corpus's project lexically (`cwa eval perf`'s lexical queries, one every 0.1 s), as a user would
while the rebuild runs; after it, `--after` searches more. Reports the rebuild's seconds and
answer, the searches' p50 / p95 during each quarter of the rebuild and after it, and the file's
bytes and free pages before and after (free pages go back to the file system at the next
maintenance pass).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from itertools import cycle
from pathlib import Path

from cwa_eval.perf.scale import PROJECTS, lexical_queries, percentiles

PAUSE = 0.1  # seconds between the probe's searches


def probe(path: str, project: str, phase, samples) -> None:
    """In another process: a lexical search every PAUSE seconds until the phase says stop; each
    search's phase, start (seconds since the probe began) and milliseconds."""
    from cwa.api import Archive

    archive = Archive.open(path)
    began = time.perf_counter()
    for query in cycle(lexical_queries(200)):
        current = phase.value
        if current == "stop":
            break
        started = time.perf_counter()
        request = {"project": project, "query": query, "limit": 10, "leaseSeconds": 0, "semanticPolicy": "never"}
        archive.search(request)
        samples.append((current, started - began, 1000 * (time.perf_counter() - started)))
        time.sleep(PAUSE)
    archive.close()


def file_pages(path: Path) -> dict:
    import apsw

    from cwa.store.status import file_pages as pages_of

    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        size, free = pages_of(conn)
    finally:
        conn.close()
    return {"fileBytes": size, "freeBytes": free}


def measure(path: Path, corpus: str, after: int) -> dict:
    from cwa.api import Archive

    before = file_pages(path)
    spawn = multiprocessing.get_context("spawn")
    with spawn.Manager() as manager:
        phase, samples = manager.Value(str, "before"), manager.list()
        prober = spawn.Process(target=probe, args=(str(path), PROJECTS[corpus], phase, samples))
        prober.start()
        while len(samples) < 5:  # the probe is searching (and warm) before the rebuild starts
            time.sleep(0.05)
        archive = Archive.open(path)
        phase.value = "during"
        started = time.perf_counter()
        answer = archive.call("index-rebuild", {})
        seconds = time.perf_counter() - started
        archive.close()
        phase.value = "after"
        while sum(1 for sample in samples if sample[0] == "after") < after:
            time.sleep(0.2)
        phase.value = "stop"
        prober.join()
        found = list(samples)
    during = [sample for sample in found if sample[0] == "during"]
    first = during[0][1] if during else 0.0
    span = max((sample[1] for sample in during), default=first) - first
    quarters = [[] for _ in range(4)]
    for _, at, took in during:
        quarters[min(3, int(4 * (at - first) / max(span, 1e-9)))].append(took)
    return {
        "documents": answer["documents"],
        "rebuildSeconds": round(seconds, 1),
        "fullTextMergeSteps": answer.get("fullTextMergeSteps"),
        "lexicalDuringByQuarter": [percentiles(quarter) for quarter in quarters],
        "lexicalDuring": percentiles([took for _, _, took in during]),
        "lexicalAfter": percentiles([took for name, _, took in found if name == "after"]),
        "before": before,
        "after": file_pages(path),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", type=Path, help="a copy: it is rebuilt in place")
    parser.add_argument("--corpus", choices=sorted(PROJECTS), default="coding")
    parser.add_argument("--after", type=int, default=100, help="searches timed after the rebuild")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.archive.is_file():
        parser.error(f"no archive at {args.archive}")
    result = measure(args.archive, args.corpus, args.after)
    print(json.dumps(result, indent=2 if args.json else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
