"""LoCoMo turn-level retrieval through cwa's public search, lexical and hybrid.

    cwa eval locomo --data ../shared/data/locomo/locomo10.json [--modes lexical,hybrid] [--json]
    python eval/locomo.py --data …                            (the same, from a checkout)

Each dialog turn is admitted as one document (message key = its normalized `dia_id`, created at
its session's real date), one project per conversation, one session per LoCoMo session: a search
result then maps to exactly one dialog turn, which is the unit the evidence names. Every question
with evidence searches only its own conversation through `Archive.search` (scope project, limit
10). Modes: `plain` (exact + BM25F only: no embeddings, no expansion), `lexical` (semanticPolicy
never, expansion on weak evidence), `auto` (explicit search's default: embeddings only
when no exact anchor matched and the lexical evidence is weak), `hybrid` (semanticPolicy always:
BM25F and embeddings fused for every question), `neighbors` (hybrid with conversation-neighbour
credit 0.5), `hybrid+rerank` (hybrid, then the cross-encoder; reported as skipped when none is installed,
as none ships). `--embedding optimized` first runs `models-optimize` on the temporary archive and
embeds with the variant if it is accepted.

Metrics, averaged over questions: R@k = share of a question's evidence turns in the top k turns;
hit@k = some evidence turn in the top k; nDCG@10 with binary gains; session R@k = share of the
evidence sessions among the sessions of the top k turns. The data is read from its path, never
copied into the repository.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from cwa.api import Archive
from cwa.errors import InvalidRequest
from cwa.models import reranker_status

DEFAULT_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo" / "locomo10.json"
MODES = {  # mode → search parameters
    "plain": {"semanticPolicy": "never", "expansion": False, "rerank": False},
    "lexical": {"semanticPolicy": "never", "rerank": False},
    "auto": {"semanticPolicy": "auto", "rerank": False},
    "hybrid": {"semanticPolicy": "always", "rerank": False},
    "neighbors": {"semanticPolicy": "always", "neighborCredit": 0.5, "rerank": False},
    "hybrid+rerank": {"semanticPolicy": "always", "rerank": True},  # only with a reranker installed
}
DEFAULT_MODES = ("lexical", "auto", "hybrid", "neighbors", "hybrid+rerank")
RERANK_MODE = "hybrid+rerank"
KS = (1, 5, 10)


def session_time(text: str) -> str:
    """'1:56 pm on 8 May, 2023' → ISO-8601."""
    moment = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")
    return moment.strftime("%Y-%m-%dT%H:%M:00Z")


def normal_id(dia_id: str) -> str | None:
    match = re.fullmatch(r"\s*D(\d+)\s*:\s*(\d+)\s*", dia_id)
    return f"D{int(match.group(1))}:{int(match.group(2))}" if match else None


def evidence_ids(raw: list[str]) -> tuple[set[str], int]:
    """Normalized evidence turn ids, and how many pieces could not be read as one."""
    found, dropped = set(), 0
    for item in raw:
        for part in re.split(r"[;,]|\s(?=D)", item):
            if not part.strip():
                continue
            normal = normal_id(part)
            if normal:
                found.add(normal)
            else:
                dropped += 1
    return found, dropped


def ingest(archive: Archive, conversations: list[dict[str, Any]]) -> int:
    turns = 0
    for conversation in conversations:
        project = f"locomo:{conversation['sample_id']}"
        dialog = conversation["conversation"]
        for key, value in dialog.items():
            if not re.fullmatch(r"session_\d+", key) or not isinstance(value, list):
                continue
            try:
                created = session_time(dialog[f"{key}_date_time"])
            except (KeyError, TypeError, ValueError) as exc:
                raise InvalidRequest(f"conversation {conversation['sample_id']}: {key} has no readable date "
                                     f"({key}_date_time)", field="data", reason="not-locomo") from exc
            if not all(isinstance(t, dict) and {"speaker", "text", "dia_id"} <= set(t) for t in value):
                raise InvalidRequest(f"conversation {conversation['sample_id']}: a turn of {key} lacks speaker, "
                                     "text or dia_id", field="data", reason="not-locomo")
            for turn in value:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares a photo: {turn['blip_caption']}]"
                archive.admit({
                    "project": project, "sessionId": key, "kind": "turn", "createdAt": created,
                    "messages": [{"key": normal_id(turn["dia_id"]) or turn["dia_id"], "role": "custom", "text": text}],
                })
                turns += 1
    return turns


def _session(turn_id: str) -> str:
    return turn_id.split(":")[0]


def score_question(wanted: set[str], ranked: list[str]) -> dict[str, float]:
    found: dict[str, float] = {}
    for k in KS:
        found[f"R@{k}"] = len(wanted & set(ranked[:k])) / len(wanted)
    for k in (5, 10):
        found[f"hit@{k}"] = float(bool(wanted & set(ranked[:k])))
        sessions = {_session(t) for t in wanted}
        found[f"sessionR@{k}"] = len(sessions & {_session(t) for t in ranked[:k]}) / len(sessions)
    dcg = sum(1 / math.log2(i + 2) for i, t in enumerate(ranked[:10]) if t in wanted)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(wanted), 10)))
    found["nDCG@10"] = dcg / ideal
    return found


def _mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(sum(r[key] for r in rows) / len(rows), 4) for key in rows[0]} if rows else {}


def load(data_path: Path) -> list[dict[str, Any]]:
    """The conversations of a LoCoMo file; `invalid-request` when it is not one."""
    try:
        conversations = orjson.loads(data_path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"{data_path} is not JSON: {exc}", field="data", reason="not-json") from exc
    shape = isinstance(conversations, list) and all(
        isinstance(c, dict) and isinstance(c.get("sample_id"), str) and isinstance(c.get("conversation"), dict)
        and isinstance(c.get("qa"), list) for c in conversations
    )
    if not shape or not conversations:
        raise InvalidRequest(f"{data_path} is not a LoCoMo file: expected a list of conversations with "
                             "sample_id, conversation and qa", field="data", reason="not-locomo")
    return conversations


def run(data_path: Path, modes: list[str], progress=None, embedding: str = "installed") -> dict[str, Any]:
    conversations = load(data_path)
    report: dict[str, Any] = {"modes": {}}
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "locomo.db") as archive:
        started = time.perf_counter()
        report["turns"] = ingest(archive, conversations)
        report["admitSeconds"] = round(time.perf_counter() - started, 1)
        if RERANK_MODE in modes and not reranker_status(archive.settings["rerankerPath"])["installed"]:
            modes = [m for m in modes if m != RERANK_MODE]
            report["skipped"] = {RERANK_MODE: "no cross-encoder installed (cwa models install-reranker)"}
        if embedding == "optimized":
            verdict = archive.call("models-optimize", {})
            report["optimize"] = {k: verdict[k] for k in ("accepted", "speedup", "meanCosine", "windows", "fingerprint")}
        if any(MODES[m]["semanticPolicy"] != "never" for m in modes):
            started = time.perf_counter()
            archive.progress = progress
            embedded = archive.call("index-embed", {})["embedded"]
            seconds = time.perf_counter() - started
            report["embedding"] = {"windows": embedded, "seconds": round(seconds, 1),
                                   "windowsPerSecond": round(embedded / seconds, 1) if seconds else None}
        dropped = 0
        for mode in modes:
            rows, by_category, latencies = [], {}, []
            for conversation in conversations:
                project = f"locomo:{conversation['sample_id']}"
                for qa in conversation["qa"]:
                    wanted, bad = evidence_ids(qa.get("evidence", []))
                    if mode == modes[0]:
                        dropped += bad
                    if not wanted:
                        continue
                    begin = time.perf_counter()
                    results = archive.search({"project": project, "query": qa["question"], "limit": 10,
                                              "leaseSeconds": 0, **MODES[mode]})["results"]
                    latencies.append((time.perf_counter() - begin) * 1000)
                    row = score_question(wanted, [r["source"]["messageKey"] for r in results])
                    rows.append(row)
                    by_category.setdefault(str(qa["category"]), []).append(row)
            latencies.sort()
            report["modes"][mode] = {
                "overall": _mean(rows),
                "byCategory": {c: _mean(v) for c, v in sorted(by_category.items())},
                "questions": len(rows),
                "searchP50Ms": round(latencies[len(latencies) // 2], 2),
                "searchP95Ms": round(latencies[int(len(latencies) * 0.95)], 2),
            }
        report["droppedEvidenceIds"] = dropped
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES))
    parser.add_argument("--embedding", choices=("installed", "optimized"), default="installed")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.data.exists():
        sys.exit(f"LoCoMo data not found at {args.data}; pass --data PATH")
    report = run(args.data, [m for m in args.modes.split(",") if m], embedding=args.embedding)
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    print_report(report)


def print_report(report: dict[str, Any]) -> None:
    print(f"{report['turns']} turns admitted in {report['admitSeconds']} s; "
          f"{report['droppedEvidenceIds']} evidence id(s) dropped")
    for mode, reason in report.get("skipped", {}).items():
        print(f"{mode}: skipped, {reason}")
    if "optimize" in report:
        o = report["optimize"]
        print(f"optimized variant {'accepted' if o['accepted'] else 'rejected'}: {o['speedup']}x, "
              f"mean cosine {o['meanCosine']} over {o['windows']} windows")
    if "embedding" in report:
        e = report["embedding"]
        print(f"embedded {e['windows']} windows in {e['seconds']} s ({e['windowsPerSecond']}/s)")
    for mode, found in report["modes"].items():
        overall = "  ".join(f"{k} {v:.3f}" for k, v in found["overall"].items())
        print(f"{mode:8} {overall}  (n={found['questions']}, search p50 {found['searchP50Ms']} ms)")
        for category, values in found["byCategory"].items():
            print(f"  category {category}: R@5 {values['R@5']:.3f}  R@10 {values['R@10']:.3f}")


if __name__ == "__main__":
    main()
