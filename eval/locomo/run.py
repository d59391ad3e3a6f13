"""LoCoMo turn-level retrieval with cwa's explicit search (exact + structural-free + BM25F).

    python eval/locomo/run.py [--data ../shared/data/locomo/locomo10.json] [--json]

Each dialog turn is admitted as one document (message key = its dia_id, created at its session's
date), one project per conversation, one session per LoCoMo session. Every question searches only
its own conversation (scope project, limit 10); Recall@k is the fraction of a question's evidence
turns among the top k, averaged over questions with evidence (the LoCoMo paper's measure).
The data is an evaluation input: it is read from its path and never copied into the repository.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa.api import Archive  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo10.json"


def session_time(text: str) -> str:
    """'1:56 pm on 8 May, 2023' → ISO-8601."""
    moment = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return moment.strftime("%Y-%m-%dT%H:%M:00Z")


def evidence_ids(raw: list[str]) -> set[str]:
    found = set()
    for item in raw:
        for part in re.split(r"[;,\s]+", item):
            match = re.fullmatch(r"D(\d+):(\d+)", part.strip())
            if match:
                found.add(f"D{int(match.group(1))}:{int(match.group(2))}")
    return found


def normal_id(dia_id: str) -> str:
    match = re.fullmatch(r"D(\d+):(\d+)", dia_id)
    return f"D{int(match.group(1))}:{int(match.group(2))}" if match else dia_id


def run(data_path: Path) -> dict:
    conversations = orjson.loads(data_path.read_bytes())
    hits = {5: [], 10: []}
    by_category: dict[int, list[float]] = {}
    latencies = []
    with tempfile.TemporaryDirectory() as folder:
        with Archive.open(Path(folder) / "locomo.db") as archive:
            started = time.perf_counter()
            turns = 0
            for conversation in conversations:
                project = f"locomo:{conversation['sample_id']}"
                dialog = conversation["conversation"]
                for key, value in dialog.items():
                    if not re.fullmatch(r"session_\d+", key) or not isinstance(value, list):
                        continue
                    created = session_time(dialog[f"{key}_date_time"])
                    for turn in value:
                        text = f"{turn['speaker']}: {turn['text']}"
                        if turn.get("blip_caption"):
                            text += f" [shares a photo: {turn['blip_caption']}]"
                        archive.admit({
                            "project": project, "sessionId": key, "kind": "turn", "createdAt": created,
                            "messages": [{"key": normal_id(turn["dia_id"]), "role": "custom", "text": text}],
                        })
                        turns += 1
            admit_seconds = time.perf_counter() - started
            for conversation in conversations:
                project = f"locomo:{conversation['sample_id']}"
                for qa in conversation["qa"]:
                    wanted = evidence_ids(qa.get("evidence", []))
                    if not wanted:
                        continue
                    begin = time.perf_counter()
                    results = archive.search({"project": project, "query": qa["question"], "limit": 10,
                                              "leaseSeconds": 0})["results"]
                    latencies.append((time.perf_counter() - begin) * 1000)
                    keys = [r["source"]["messageKey"] for r in results]
                    for k in hits:
                        hits[k].append(len(wanted & set(keys[:k])) / len(wanted))
                    by_category.setdefault(qa["category"], []).append(len(wanted & set(keys[:5])) / len(wanted))
    latencies.sort()
    return {
        "turns": turns,
        "questions": len(hits[5]),
        "recall_at_5": round(sum(hits[5]) / len(hits[5]), 3),
        "recall_at_10": round(sum(hits[10]) / len(hits[10]), 3),
        "recall_at_5_by_category": {c: round(sum(v) / len(v), 3) for c, v in sorted(by_category.items())},
        "admit_seconds": round(admit_seconds, 1),
        "search_p50_ms": round(latencies[len(latencies) // 2], 2),
        "search_p95_ms": round(latencies[int(len(latencies) * 0.95)], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.data.exists():
        sys.exit(f"LoCoMo data not found at {args.data}; pass --data PATH")
    result = run(args.data)
    if args.json:
        print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    else:
        for key, value in result.items():
            print(f"{key:<26} {value}")


if __name__ == "__main__":
    main()
