"""Recall on long synthetic coding histories (eval/retrieval/long_history.py): `cwa eval long`.

    cwa eval long [--tokens 100000,500000] [--histories 4] [--facts-per-kind 4]
                  [--modes fts5,lexical,hybrid] [--seed 41] [--json]

For each size, `--histories` histories of that many tokens go into one temporary archive, a
project each. Every question searches its own project (limit 10); R@k is the share of its
evidence messages in the top k, overall and by kind, beside the floor (bare SQLite FTS5 over the
same messages, the question's words OR-ed, bm25()) in the same run. The shipped ranker is used:
it never saw these histories. Preflight is measured as `cwa eval locomo` does (age limits lifted,
the histories being months long): each question once as "Remind me: …" (is a snippet shown, and
is its source an evidence message?) and once as asked; the reasons preflight gave when it showed
nothing are counted too.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cwa.api import Archive
from cwa_eval.retrieval.locomo import (
    FLOOR,
    KS,
    MODES,
    REMIND,
    _mean,
    bare_table,
    floor_search,
    score_question,
    source_keys,
    without_age_limits,
)
from cwa_eval.retrieval.long_history import KINDS, admit_histories, history, project


def run(
    sizes: list[int],
    histories: int,
    per_kind: int,
    modes: list[str],
    seed: int,
    progress=None,
    inside: bool = False,
    echo: bool = False,
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "histories": histories,
        "factsPerKind": per_kind,
        "seed": seed,
        "inside": inside,
        "echo": echo,
        "sizes": {},
    }
    for tokens in sizes:
        report["sizes"][str(tokens)] = _run_size(tokens, histories, per_kind, modes, seed, progress, inside, echo)
    return report


def _run_size(
    tokens: int, histories: int, per_kind: int, modes: list[str], seed: int, progress, inside: bool, echo: bool
) -> dict[str, Any]:
    made = [history(seed + i, tokens, per_kind, inside, echo) for i in range(histories)]
    found: dict[str, Any] = {
        "tokens": tokens,
        "documents": sum(len(h.documents) for h in made),
        "historyTokensMean": round(sum(h.tokens for h in made) / len(made)),
        "questions": sum(len(h.facts) for h in made),
        "modes": {},
    }
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "long.db") as archive:
        started = time.perf_counter()
        admit_histories(archive, made)
        found["admitSeconds"] = round(time.perf_counter() - started, 1)
        # a project's windows lie in its range (docs/retrieval.md): search's size rules see this many
        spans = archive.conn.execute("SELECT high - low + 1 FROM project_window_spans").fetchall()
        found["windowsPerHistory"] = {"min": min(n for (n,) in spans), "max": max(n for (n,) in spans)}
        if any(m != FLOOR and MODES[m]["semanticPolicy"] != "never" for m in modes):
            started = time.perf_counter()
            archive.progress = progress
            found["embeddedWindows"] = archive.call("index-embed", {})["embedded"]
            found["embedSeconds"] = round(time.perf_counter() - started, 1)
        for mode in modes:
            found["modes"][mode] = _recall(archive, made, mode)
        found["preflight"] = preflight_figures(archive, made)
    return found


def _recall(archive: Archive, made: list, mode: str) -> dict[str, Any]:
    rows, by_kind, latencies = [], {}, []
    for index, made_history in enumerate(made):
        floor = None
        if mode == FLOOR:
            floor = bare_table(
                [(m["key"], m["text"]) for document in made_history.documents for m in document["messages"]]
            )
        for fact in made_history.facts:
            begin = time.perf_counter()
            if floor is not None:
                ranked = floor_search(floor, fact.question)
            else:
                results = archive.search(
                    {"project": project(index), "query": fact.question, "limit": 10, "leaseSeconds": 0, **MODES[mode]}
                )["results"]
                ranked = [r["source"]["messageKey"] for r in results]
            latencies.append((time.perf_counter() - begin) * 1000)
            row = {key: value for key, value in score_question(fact.evidence, ranked).items() if key.startswith("R@")}
            rows.append(row)
            by_kind.setdefault(fact.kind, []).append(row)
    latencies.sort()
    return {
        "overall": _mean(rows),
        "byKind": {kind: _mean(by_kind[kind]) for kind in KINDS if kind in by_kind},
        "searchP50Ms": round(latencies[len(latencies) // 2], 2),
        "searchP95Ms": round(latencies[int(len(latencies) * 0.95)], 2),
    }


def preflight_figures(archive: Archive, made: list, tag: str = "eval") -> dict[str, Any]:
    base = archive.settings
    archive.settings = without_age_limits(base)
    key_of = source_keys(archive)
    runs: dict[str, dict[str, Any]] = {name: {"hints": [], "reasons": Counter()} for name in ("remind", "plain")}
    asked = 0
    try:
        for index, made_history in enumerate(made):
            for number, fact in enumerate(made_history.facts):
                asked += 1
                for name, prefix in (("remind", REMIND), ("plain", "")):
                    answer = archive.call(
                        "preflight",
                        {
                            "project": project(index),
                            "sessionId": f"{tag}-{name}-{number}",
                            "messageKey": "m",
                            "text": prefix + fact.question,
                        },
                    )
                    runs[name]["reasons"][answer["diagnostics"]["reason"]] += 1
                    for hint in answer["hints"]:
                        right = key_of(hint["source"]["documentId"]) in fact.evidence
                        runs[name]["hints"].append((hint["type"], right))
    finally:
        archive.settings = base
    remind = [right for kind, right in runs["remind"]["hints"] if kind == "historical-snippet"]
    plain = runs["plain"]["hints"]
    return {
        "questions": asked,
        "remind": {
            "fireRate": round(len(remind) / asked, 4),
            "precision": round(sum(remind) / len(remind), 4) if remind else None,
            "reasons": dict(runs["remind"]["reasons"].most_common()),
        },
        "plain": {
            "hintRate": round(len(plain) / asked, 4),
            "evidenceShare": round(sum(r for _, r in plain) / len(plain), 4) if plain else None,
            "reasons": dict(runs["plain"]["reasons"].most_common()),
        },
    }


def print_report(report: dict[str, Any]) -> None:
    print(
        f"{report['histories']} histories per size, {report['factsPerKind']} facts of each kind "
        f"({', '.join(KINDS)}), seed {report['seed']}"
        + (", each inside a long message (--inside)" if report["inside"] else "")
        + (", the user's restated in the reply (--echo)" if report.get("echo") else "")
    )
    for size, found in report["sizes"].items():
        print(
            f"\n{int(size):,} tokens: {found['documents']:,} messages, {found['questions']} questions, "
            f"admitted in {found['admitSeconds']} s"
        )
        floor = found["modes"].get(FLOOR, {}).get("overall")
        for mode, figures in found["modes"].items():
            overall = "  ".join(f"R@{k} {figures['overall'][f'R@{k}']:.3f}" for k in KS)
            gain = ""
            if floor and mode != FLOOR:
                gain = "  (" + " ".join(f"{figures['overall'][f'R@{k}'] - floor[f'R@{k}']:+.3f}" for k in (5, 10)) + ")"
            print(f"  {mode:8} {overall}{gain}   search p50 {figures['searchP50Ms']} ms")
            print("           R@10 by kind: " + "  ".join(f"{k} {v['R@10']:.2f}" for k, v in figures["byKind"].items()))
        pre = found["preflight"]
        print(
            f'  preflight: "Remind me" fires {pre["remind"]["fireRate"]:.3f} (precision {pre["remind"]["precision"]}); '
            f"plain questions get a hint {pre['plain']['hintRate']:.3f} (on evidence {pre['plain']['evidenceShare']})"
        )
        print(f"  silent because: remind {pre['remind']['reasons']}; plain {pre['plain']['reasons']}")
