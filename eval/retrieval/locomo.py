"""LoCoMo turn-level retrieval through cwa's public search, per mode, the learned ranker out of fold.

    cwa eval locomo --data ../shared/data/locomo/locomo10.json [--modes …] [--no-coding-training] [--json]
    python eval/locomo.py --data …                            (the same, from a checkout)

Each dialog turn is admitted as one document (message key = its normalized `dia_id`, created at
its session's real date), one project per conversation, one session per LoCoMo session: a search
result then maps to exactly one dialog turn, which is the unit the evidence names. Every question
with evidence searches only its own conversation through `Archive.search` (scope project, limit
10). Modes: `fts5` (the floor: bare SQLite FTS5 over the same turn texts, `porter unicode61`, the
question's words less stop words OR-ed, `bm25()`); the rank fusion before the learned ranker,
`plain` (exact + BM25F, no expansion), `fused-lexical`, `fused-hybrid` (embeddings for every
question) and `neighbors` (fused-hybrid with conversation-neighbour credit 0.5); the learned
ranker, `lexical` (semanticPolicy never), `auto` (explicit search's default: embeddings on weak
evidence), `hybrid` (always) and `hybrid+rerank` (then the cross-encoder; skipped when none is
installed, as none ships). `--embedding optimized` first runs `models-optimize` on the temporary
archive and embeds with the variant if it is accepted.

Out of fold: the conversations are split in FOLDS contiguous groups; the ranker is trained (from
the pools search reports with `explain`, cwa/evaluation/ranker_training.py) on every group but
one, plus the synthetic coding facts unless `--no-coding-training`, and scores that one. The
training figures (each group scored by a ranker trained on it) are reported beside. Preflight
is measured the same way: each question as "Remind me: <question>" and as asked, age limits
lifted (`preflight_figures`).

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
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import apsw
import orjson

from cwa.api import Archive
from cwa.config import Settings
from cwa.errors import InvalidRequest
from cwa.index.terms import STOP_WORDS
from cwa.models import reranker_status

DEFAULT_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo" / "locomo10.json"
MODES = {  # mode → search parameters
    "plain": {"semanticPolicy": "never", "expansion": False, "rerank": False, "ranker": "fused"},
    "fused-lexical": {"semanticPolicy": "never", "rerank": False, "ranker": "fused"},
    "fused-hybrid": {"semanticPolicy": "always", "rerank": False, "ranker": "fused"},
    "neighbors": {"semanticPolicy": "always", "neighborCredit": 0.5, "rerank": False, "ranker": "fused"},
    "lexical": {"semanticPolicy": "never", "rerank": False, "ranker": "learned"},
    "auto": {"semanticPolicy": "auto", "rerank": False, "ranker": "learned"},
    "hybrid": {"semanticPolicy": "always", "rerank": False, "ranker": "learned"},
    "hybrid+rerank": {
        "semanticPolicy": "always",
        "rerank": True,
        "ranker": "learned",
    },  # only with a reranker installed
}
FLOOR = "fts5"  # bare SQLite FTS5: the turn texts in one table, the question's words OR-ed, bm25()
LEARNED = {m for m, p in MODES.items() if p["ranker"] == "learned"}
POOLS = {"lexical": {"semanticPolicy": "never"}, "hybrid": {"semanticPolicy": "always"}}  # ranker model → pool
DEFAULT_MODES = (FLOOR, "fused-lexical", "fused-hybrid", "neighbors", "lexical", "auto", "hybrid", "hybrid+rerank")
RERANK_MODE = "hybrid+rerank"
FOLDS = 2
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


def turn_text(turn: dict[str, Any]) -> str:
    """A dialog turn as one document's text: the speaker, the words, a shared photo's caption."""
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares a photo: {turn['blip_caption']}]"
    return text


def ingest(archive: Archive, conversations: list[dict[str, Any]], bulk: bool = False) -> int:
    """Admit every dialog turn, one document each (`turn_requests`); how many. One `admit` call a
    turn, or with `bulk` one `admit_many` for all (archived first in batches, then indexed)."""
    if bulk:
        return len(archive.admit_many(turn_requests(conversations)))
    turns = 0
    for request in turn_requests(conversations):
        archive.admit(request)
        turns += 1
    return turns


def turn_requests(conversations: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The admit request of every dialog turn: a document of kind `turn` in its conversation's
    project and its session, dated as the session, keyed by its turn id."""
    for conversation in conversations:
        project = f"locomo:{conversation['sample_id']}"
        dialog = conversation["conversation"]
        for key, value in dialog.items():
            if not re.fullmatch(r"session_\d+", key) or not isinstance(value, list):
                continue
            try:
                created = session_time(dialog[f"{key}_date_time"])
            except (KeyError, TypeError, ValueError) as exc:
                raise InvalidRequest(
                    f"conversation {conversation['sample_id']}: {key} has no readable date ({key}_date_time)",
                    field="data",
                    reason="not-locomo",
                ) from exc
            if not all(isinstance(t, dict) and {"speaker", "text", "dia_id"} <= set(t) for t in value):
                raise InvalidRequest(
                    f"conversation {conversation['sample_id']}: a turn of {key} lacks speaker, text or dia_id",
                    field="data",
                    reason="not-locomo",
                )
            for turn in value:
                yield {
                    "project": project,
                    "sessionId": key,
                    "kind": "turn",
                    "createdAt": created,
                    "messages": [
                        {"key": normal_id(turn["dia_id"]) or turn["dia_id"], "role": "custom", "text": turn_text(turn)}
                    ],
                }


def session_of(turn_id: str) -> str:
    """The LoCoMo session of a turn id (`D3:7` → `D3`)."""
    return turn_id.split(":")[0]


def score_question(wanted: set[str], ranked: list[str]) -> dict[str, float]:
    found: dict[str, float] = {}
    for k in KS:
        found[f"R@{k}"] = len(wanted & set(ranked[:k])) / len(wanted)
    for k in (5, 10):
        found[f"hit@{k}"] = float(bool(wanted & set(ranked[:k])))
        sessions = {session_of(t) for t in wanted}
        found[f"sessionR@{k}"] = len(sessions & {session_of(t) for t in ranked[:k]}) / len(sessions)
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
        isinstance(c, dict)
        and isinstance(c.get("sample_id"), str)
        and isinstance(c.get("conversation"), dict)
        and isinstance(c.get("qa"), list)
        for c in conversations
    )
    if not shape or not conversations:
        raise InvalidRequest(
            f"{data_path} is not a LoCoMo file: expected a list of conversations with sample_id, conversation and qa",
            field="data",
            reason="not-locomo",
        )
    return conversations


def fold_of(index: int, conversations: int) -> int:
    """Conversations split in FOLDS contiguous groups by their order in the file."""
    return index * FOLDS // conversations


def questions(conversation: dict[str, Any]) -> list[tuple[dict[str, Any], set[str], int]]:
    """(qa, evidence turn ids, unreadable evidence pieces) of each question."""
    return [(qa, *evidence_ids(qa.get("evidence", []))) for qa in conversation["qa"]]


def floor_table(conversation: dict[str, Any], extra: list[tuple[str, str]] = ()) -> apsw.Connection:
    """Bare SQLite FTS5 over one conversation, as the data's README measures it: the turn texts
    cwa admits, in one in-memory table with the `porter unicode61` tokenizer (and the `extra`
    (id, text) documents of a haystack)."""
    own = [(normal_id(turn["dia_id"]) or turn["dia_id"], turn_text(turn)) for _, turn in session_turns(conversation)]
    return bare_table([*own, *extra])


def session_turns(conversation: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(session key, turn) of every dialog turn of a loaded conversation, in order."""
    return [
        (key, turn)
        for key, value in conversation["conversation"].items()
        if re.fullmatch(r"session_\d+", key) and isinstance(value, list)
        for turn in value
    ]


def bare_table(rows: list[tuple[str, str]]) -> apsw.Connection:
    """The floor's index: (id, text) rows in one in-memory FTS5 table, `porter unicode61`."""
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE VIRTUAL TABLE turns USING fts5 (id UNINDEXED, text, tokenize = 'porter unicode61')")
    conn.executemany("INSERT INTO turns VALUES (?, ?)", rows)
    return conn


def dialog_turns(conversation: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(session key, date text, turn text) of every dialog turn, in order."""
    dialog = conversation["conversation"]
    return [(key, dialog.get(f"{key}_date_time", ""), turn_text(turn)) for key, turn in session_turns(conversation)]


def ingest_haystack(archive: Archive, conversations: list[dict[str, Any]], tokens: int) -> dict[str, Any]:
    """Each conversation's project grown to about `tokens` tokens with distractors
    (eval/retrieval/haystack.py); the floor's extra documents per conversation, and the sizes."""
    from cwa_eval.retrieval import haystack

    extra: dict[str, list[tuple[str, str]]] = {}
    sizes, documents = [], 0
    every = [dialog_turns(c) for c in conversations]
    for index, conversation in enumerate(conversations):
        project = f"locomo:{conversation['sample_id']}"
        turns = every[index]
        own = sum(haystack.tokens_of(text) for _, _, text in turns)
        dates = sorted({session_time(date) for _, date, _ in turns if date})
        rows = extra.setdefault(conversation["sample_id"], [])
        spent = own
        for request in haystack.distractors(every, index, dates, max(0, tokens - own)):
            archive.admit({"project": project, **request})
            text = "\n\n".join(m["text"] for m in request["messages"])
            rows.append((request["messages"][0]["key"], text))
            spent += sum(haystack.tokens_of(m["text"]) for m in request["messages"])
            documents += 1
        sizes.append(spent)
    return {
        "extra": extra,
        "report": {
            "tokens": tokens,
            "distractorDocuments": documents,
            "projectTokensMin": min(sizes),
            "projectTokensMean": round(sum(sizes) / len(sizes)),
        },
    }


def floor_search(conn: apsw.Connection, question: str) -> list[str]:
    """The question's words less stop words, OR-ed, ordered by bm25(): the top 10 turn ids."""
    words = dict.fromkeys(w for w in re.findall(r"\w+", question.lower()) if w not in STOP_WORDS)
    if not words:
        return []
    match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
    return [
        r[0] for r in conn.execute("SELECT id FROM turns WHERE turns MATCH ? ORDER BY bm25(turns) LIMIT 10", (match,))
    ]


CODING = "coding"  # the examples of synthetic coding facts, in every fold's training
LONG = "long"  # the examples of long synthetic coding histories (eval/retrieval/long_history.py), likewise
SYNTHETIC = (CODING, LONG)
# Each long-history example counts this much in training: one generator's questions (a few
# templates) must not outweigh real conversations (at weight 1, LoCoMo out of fold lost 0.012 at R@10).
GROUP_WEIGHTS = {LONG: 0.25}


def collect_examples(
    archive: Archive, conversations: list[dict[str, Any]], folder: Path, with_coding: bool = True
) -> dict[str, Any]:
    """Every question's pool for each ranker model, as search reports it, labelled by evidence;
    `with_coding`, the synthetic ones' too: coding facts (eval/retrieval/coding.py) under CODING,
    long coding histories (eval/retrieval/long_history.py) under LONG."""
    from cwa_eval.retrieval import coding, long_history
    from cwa_eval.retrieval import ranker_training as training

    examples = {name: training.Examples() for name in POOLS}
    if with_coding:
        for group, found in (
            (CODING, coding.training_examples(folder, POOLS)),
            (LONG, long_history.training_examples(folder, POOLS)),
        ):
            for name, (features, labels) in found.items():
                for rows, marks in zip(features, labels):
                    examples[name].add(group, rows, marks)
    for name, pool in POOLS.items():
        for conversation in conversations:
            project = f"locomo:{conversation['sample_id']}"
            for qa, wanted, _ in questions(conversation):
                if wanted:
                    features, labels = training.collect(archive, project, qa["question"], wanted, pool)
                    examples[name].add(conversation["sample_id"], features, labels)
    return examples


def train_folds(
    archive: Archive, conversations: list[dict[str, Any]], folder: Path, with_coding: bool = True
) -> dict[str, list[Path]]:
    """Ranker weights per fold, from the pools search reports: `outOfFold[k]` is trained on every
    fold but k (it scores fold k), `inFold[k]` on fold k alone (the training figures); both also
    on the synthetic coding facts and histories, as the shipped ranker is, unless not `with_coding`."""
    from cwa_eval.retrieval import ranker_training as training

    examples = collect_examples(archive, conversations, folder, with_coding)
    ids = [c["sample_id"] for c in conversations]
    files: dict[str, list[Path]] = {"outOfFold": [], "inFold": []}
    for k in range(FOLDS):
        held = [i for n, i in enumerate(ids) if fold_of(n, len(ids)) == k]
        rest = [i for i in ids if i not in held]
        for kind, trained_on in (("outOfFold", [*rest, *SYNTHETIC]), ("inFold", [*held, *SYNTHETIC])):
            path = folder / f"ranker-{kind}-{k}.json"
            path.write_bytes(training.train(examples, trained_on, GROUP_WEIGHTS))
            files[kind].append(path)
    return files


REMIND = "Remind me: "
AGE_LIMITS = ("ephemeralAutoRetrievalDays", "conversationAutoRetrievalDays", "derivedAutoRetrievalDays")


def without_age_limits(settings: Settings, **values: Any) -> Settings:
    """`settings` with preflight's automatic age limits lifted (an evaluation's turns are old),
    and any other `values` given."""
    return replace(settings, values={**settings.values, **dict.fromkeys(AGE_LIMITS, 0), **values})


def source_keys(archive: Archive) -> Callable[[str], str]:
    """A hint source's first source key (a LoCoMo turn's or a long history's message key) by its
    document id, each document asked of the archive once."""
    known: dict[str, str] = {}

    def key_of(document_id: str) -> str:
        if document_id not in known:
            known[document_id] = archive.get({"documentId": document_id})["sourceKeys"]["first"]
        return known[document_id]

    return key_of


SHARES = (0.0, 0.5, 0.7, 0.8)  # other snippet thresholds measured ("Remind me" only); 0.0: no share gate
MARKER_SHARES = (0.0, 0.5, 0.7)  # other marker thresholds measured (questions as asked); 0.0: no share gate


def preflight_figures(
    archive: Archive, conversations: list[dict[str, Any]], files: list[Path], tag: str
) -> dict[str, Any]:
    """Each question as a user message through preflight, age limits lifted (the turns are years
    old), each conversation scored with the ranker of the fold that did not see it: once prefixed
    "Remind me: " (historical intent: may a snippet be shown, and is its source an evidence turn?),
    at the shipped snippet threshold and at the other SHARES (the `snippetMinShare` policy), and
    once as asked (how many hints, snippet or marker, stand on an evidence turn?), at the shipped
    marker threshold and at the other MARKER_SHARES (`markerMinShare`)."""
    base = archive.settings
    turn_of = source_keys(archive)
    shown: dict[str, list[tuple[str, bool]]] = {}  # per run, per hint: (type, source is an evidence turn)
    asked, latencies = 0, []
    runs = {
        "plain": (None, ""),
        "remind": (None, REMIND),
        **{f"remind@{s}": ({"snippetMinShare": s}, REMIND) for s in SHARES},
        **{f"plain@{s}": ({"markerMinShare": s}, "") for s in MARKER_SHARES},
    }
    for index, conversation in enumerate(conversations):
        archive.settings = without_age_limits(base, rankerPath=str(files[fold_of(index, len(conversations))]))
        project = f"locomo:{conversation['sample_id']}"
        for number, (qa, wanted, _) in enumerate(questions(conversation)):
            if not wanted:
                continue
            asked += 1
            for run_name, (policy, prefix) in runs.items():
                request = {
                    "project": project,
                    "sessionId": f"eval-{tag}-{run_name}-{number}",
                    "messageKey": "m",
                    "text": prefix + qa["question"],
                }
                if policy is not None:
                    request["policy"] = policy
                begin = time.perf_counter()
                found = archive.call("preflight", request)
                if policy is None:
                    latencies.append((time.perf_counter() - begin) * 1000)
                for hint in found["hints"]:
                    shown.setdefault(run_name, []).append(
                        (hint["type"], turn_of(hint["source"]["documentId"]) in wanted)
                    )
    archive.settings = base
    latencies.sort()

    def snippets(run_name: str) -> dict[str, Any]:
        right = [r for kind, r in shown.get(run_name, []) if kind == "historical-snippet"]
        return {
            "fireRate": round(len(right) / asked, 4) if asked else 0.0,
            "snippets": len(right),
            "precision": round(sum(right) / len(right), 4) if right else None,
        }

    def hints(run_name: str) -> dict[str, Any]:
        plain = shown.get(run_name, [])
        return {
            "hintRate": round(len(plain) / asked, 4) if asked else 0.0,
            "hints": len(plain),
            "snippets": sum(kind == "historical-snippet" for kind, _ in plain),
            "evidenceShare": round(sum(right for _, right in plain) / len(plain), 4) if plain else None,
        }

    return {
        "questions": asked,
        "preflightP50Ms": round(latencies[len(latencies) // 2], 2) if latencies else None,
        "preflightP95Ms": round(latencies[int(len(latencies) * 0.95)], 2) if latencies else None,
        "remind": snippets("remind"),
        "remindByShare": {str(s): snippets(f"remind@{s}") for s in SHARES},
        "plain": hints("plain"),
        "plainByMarkerShare": {str(s): hints(f"plain@{s}") for s in MARKER_SHARES},
    }


def preflight_summary(found: dict[str, Any], digits: int = 3) -> str:
    """One line of `preflight_figures`' shipped figures: "Remind me" snippets, plain questions' hints."""
    remind, plain = found["remind"], found["plain"]
    return (
        f'"Remind me" snippets fire {remind["fireRate"]:.{digits}f}, precision {remind["precision"]}; '
        f"plain questions: hints {plain['hintRate']:.{digits}f}, on evidence turns {plain['evidenceShare']}"
    )


def run(
    data_path: Path,
    modes: list[str],
    progress=None,
    embedding: str = "installed",
    coding_training: bool = True,
    haystack: int | None = None,
) -> dict[str, Any]:
    conversations = load(data_path)
    report: dict[str, Any] = {"modes": {}, "folds": FOLDS, "codingTraining": coding_training}
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "locomo.db") as archive:
        started = time.perf_counter()
        report["turns"] = ingest(archive, conversations)
        extra: dict[str, list[tuple[str, str]]] = {}
        if haystack:
            grown = ingest_haystack(archive, conversations, haystack)
            extra, report["haystack"] = grown["extra"], grown["report"]
        report["admitSeconds"] = round(time.perf_counter() - started, 1)
        if RERANK_MODE in modes and not reranker_status(archive.settings["rerankerPath"])["installed"]:
            modes = [m for m in modes if m != RERANK_MODE]
            report["skipped"] = {RERANK_MODE: "no cross-encoder installed (cwa models install-reranker)"}
        if embedding == "optimized":
            verdict = archive.call("models-optimize", {})
            report["optimize"] = {
                k: verdict[k] for k in ("accepted", "speedup", "meanCosine", "windows", "fingerprint")
            }
        if any(m != FLOOR and MODES[m]["semanticPolicy"] != "never" for m in modes) or LEARNED & set(modes):
            started = time.perf_counter()
            archive.progress = progress
            embedded = archive.call("index-embed", {})["embedded"]
            seconds = time.perf_counter() - started
            report["embedding"] = {
                "windows": embedded,
                "seconds": round(seconds, 1),
                "windowsPerSecond": round(embedded / seconds, 1) if seconds else None,
            }
        weights = train_folds(archive, conversations, Path(folder), coding_training) if LEARNED & set(modes) else None
        report["droppedEvidenceIds"] = sum(bad for c in conversations for _, _, bad in questions(c))
        base = archive.settings
        for mode in modes:
            figures = (
                {"outOfFold": weights["outOfFold"], "inFold": weights["inFold"]} if mode in LEARNED else {"": None}
            )
            for kind, files in figures.items():
                rows, by_category, latencies = [], {}, []
                for index, conversation in enumerate(conversations):
                    project = f"locomo:{conversation['sample_id']}"
                    if files:
                        archive.settings = replace(
                            base, values={**base.values, "rankerPath": str(files[fold_of(index, len(conversations))])}
                        )
                    floor = (
                        floor_table(conversation, extra.get(conversation["sample_id"], [])) if mode == FLOOR else None
                    )
                    for qa, wanted, _ in questions(conversation):
                        if not wanted:
                            continue
                        begin = time.perf_counter()
                        if floor is not None:
                            ranked = floor_search(floor, qa["question"])
                        else:
                            results = archive.search(
                                {
                                    "project": project,
                                    "query": qa["question"],
                                    "limit": 10,
                                    "leaseSeconds": 0,
                                    **MODES[mode],
                                }
                            )["results"]
                            ranked = [r["source"]["messageKey"] for r in results]
                        latencies.append((time.perf_counter() - begin) * 1000)
                        row = score_question(wanted, ranked)
                        rows.append(row)
                        by_category.setdefault(str(qa["category"]), []).append(row)
                archive.settings = base
                latencies.sort()
                found = {
                    "overall": _mean(rows),
                    "byCategory": {c: _mean(v) for c, v in sorted(by_category.items())},
                    "questions": len(rows),
                    "searchP50Ms": round(latencies[len(latencies) // 2], 2),
                    "searchP95Ms": round(latencies[int(len(latencies) * 0.95)], 2),
                }
                if kind == "inFold":
                    report["modes"][mode]["training"] = found
                else:
                    report["modes"][mode] = found
        if weights:
            report["preflight"] = preflight_figures(archive, conversations, weights["outOfFold"], "oof")
            report["preflight"]["training"] = preflight_figures(archive, conversations, weights["inFold"], "in")
    return report


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES))
    parser.add_argument("--embedding", choices=("installed", "optimized"), default="installed")
    parser.add_argument("--no-coding-training", action="store_true")
    parser.add_argument("--haystack", type=int, default=None, help="grow each conversation's project to TOKENS")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.data.exists():
        sys.exit(f"LoCoMo data not found at {args.data}; pass --data PATH")
    report = run(
        args.data,
        [m for m in args.modes.split(",") if m],
        embedding=args.embedding,
        coding_training=not args.no_coding_training,
        haystack=args.haystack,
    )
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    print_report(report)


def print_report(report: dict[str, Any]) -> None:
    print(
        f"{report['turns']} turns admitted in {report['admitSeconds']} s; "
        f"{report['droppedEvidenceIds']} evidence id(s) dropped"
    )
    if "haystack" in report:
        h = report["haystack"]
        print(
            f"haystack: each project grown to ~{h['tokens']:,} tokens ({h['distractorDocuments']} distractor "
            f"documents; project tokens min {h['projectTokensMin']:,}, mean {h['projectTokensMean']:,})"
        )
    for mode, reason in report.get("skipped", {}).items():
        print(f"{mode}: skipped, {reason}")
    if "optimize" in report:
        o = report["optimize"]
        print(
            f"optimized variant {'accepted' if o['accepted'] else 'rejected'}: {o['speedup']}x, "
            f"mean cosine {o['meanCosine']} over {o['windows']} windows"
        )
    if "embedding" in report:
        e = report["embedding"]
        print(f"embedded {e['windows']} windows in {e['seconds']} s ({e['windowsPerSecond']}/s)")
    for mode, found in report["modes"].items():
        overall = "  ".join(f"{k} {v:.3f}" for k, v in found["overall"].items())
        label = f"{mode} (out of fold)" if "training" in found else mode
        print(
            f"{label:24} {overall}  (n={found['questions']}, search p50 {found['searchP50Ms']} ms, "
            f"p95 {found['searchP95Ms']} ms)"
        )
        for category, values in found["byCategory"].items():
            print(f"  category {category}: R@1 {values['R@1']:.3f}  R@5 {values['R@5']:.3f}  R@10 {values['R@10']:.3f}")
        if "training" in found:
            trained = "  ".join(f"{k} {v:.3f}" for k, v in found["training"]["overall"].items())
            print(f"  {'training figures (in fold)':22} {trained}")
    if "preflight" in report:
        for label, found in (("out of fold", report["preflight"]), ("training", report["preflight"]["training"])):
            print(
                f"preflight ({label}): {preflight_summary(found)} (preflight p50 {found['preflightP50Ms']} ms, "
                f"p95 {found['preflightP95Ms']} ms)"
            )
            for share, other in found["remindByShare"].items():
                print(f"  snippetMinShare {share}: fire {other['fireRate']:.3f}, precision {other['precision']}")
            for share, other in found["plainByMarkerShare"].items():
                print(f"  markerMinShare {share}: hints {other['hintRate']:.3f}, on evidence {other['evidenceShare']}")


if __name__ == "__main__":
    main()
