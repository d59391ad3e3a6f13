"""What the embedding model finds on its own when the query's most common words are left out
(docs/evaluation.md, "The query embedded without the words most of its scope holds").

    python eval/perf/embedded_query.py [--data locomo10.json] [--shares 1,0.5,0.3,0.2,0.1] [--json]
    python eval/perf/embedded_query.py --long 100000 [--histories 8] [--seed 41] [--shares S] [--json]
    python eval/perf/embedded_query.py --speakers [--data locomo10.json] [--json]
    python eval/perf/embedded_query.py --cost ARCHIVE [--queries 100] [--json]

Reads the data in place into a temporary archive (one document a turn, embedded) and asks every
question with evidence of its conversation's project through the semantic path alone
(`semantic.query_vector`, then `semantic.semantic_candidates`: no lexical candidate, no ranker),
once per share: a query word whose terms are in more than that share of the project's windows is
left out of the text the model reads (`semantic.COMMON_SHARE`; 1 leaves every word in). Reports
R@1 / R@5 / R@10 of the evidence turns for each share, and the words left out most often at the
shipped share. With `--long TOKENS`, instead: how many questions of `cwa eval long --inside`'s
histories of that size (as that command makes them) have a word left out at the shipped share
(or `--shares`' first), and which (nothing is embedded: the words depend on the counts only). With `--cost ARCHIVE` (e.g.
one `cwa eval perf --keep` kept), instead: what counting the words around the best lexical
candidates (`semantic.common_near`) costs a query, over `cwa eval perf`'s lexical queries in
its coding project, each first searched lexically as hybrid search does before it embeds; and
how many queries it leaves a word out of. With `--speakers`: each LoCoMo conversation's share of
turns holding each speaker's name (nothing embedded).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from cwa.api import Archive
from cwa.index.terms import terms
from cwa.retrieve import semantic
from cwa.retrieve.context import make_context
from cwa.retrieve.scope import resolve_scope
from cwa.store.sqlfiles import queries
from cwa_eval.perf.bench import latency
from cwa_eval.perf.scale import PROJECTS, lexical_queries
from cwa_eval.retrieval import locomo
from cwa_eval.retrieval.long_history import admit_histories, history
from cwa_eval.retrieval.long_history import project as history_project

KS = (1, 5, 10)
SHIPPED = semantic.COMMON_SHARE


def _context(archive: Archive, project: str):
    scope = resolve_scope(archive.conn, "project", project, None, "all")
    return make_context(archive.conn, scope, [], "2030-01-01T00:00:00Z", None)


def nearest_turns(archive: Archive, project: str, question: str) -> list[str]:
    """The message keys of the ten turns whose embedding is nearest the question's."""
    conn = archive.conn
    context = _context(archive, project)
    vector = semantic.query_vector(context, question).vector
    found = semantic.semantic_candidates(context, vector, terms(question), max(KS), set())[: max(KS)]
    first_key = queries("admission")["message_keys"]  # a LoCoMo turn is one message
    return [conn.execute(first_key, (c.document_row,)).fetchone()[0] for c in found]


def run(data: Path, shares: list[float]) -> dict:
    conversations = locomo.load(data)
    report: dict = {"questions": 0, "shares": {}}
    with tempfile.TemporaryDirectory() as folder, Archive.open(Path(folder) / "locomo.db") as archive:
        locomo.ingest(archive, conversations)
        archive.call("index-embed", {})
        left_out: Counter = Counter()
        for share in shares:
            found = {k: 0.0 for k in KS}
            asked = 0
            with mock.patch.object(semantic, "COMMON_SHARE", share):
                for conversation in conversations:
                    project = f"locomo:{conversation['sample_id']}"
                    for qa, wanted, _ in locomo.questions(conversation):
                        if not wanted:
                            continue
                        ranked = nearest_turns(archive, project, qa["question"])
                        for k in KS:
                            found[k] += len(wanted & set(ranked[:k])) / len(wanted)
                        asked += 1
                        if share == SHIPPED:
                            kept = semantic.embedded_query(_context(archive, project), qa["question"]).split()
                            left_out.update(w for w in qa["question"].split() if w not in kept)
            report["questions"] = asked
            report["shares"][str(share)] = {f"R@{k}": round(found[k] / asked, 4) for k in KS}
        report["leftOutMost"] = left_out.most_common(12)
    return report


def speaker_shares(data: Path) -> list[dict]:
    """Each LoCoMo conversation's share of turns (as archived, "Speaker: words") holding each
    speaker's name: what a speaker's name weighs among its own conversation's windows."""
    found = []
    for conversation in locomo.load(data):
        turns = [set(terms(text)) for _, _, text in locomo.dialog_turns(conversation)]
        shares = {}
        for speaker in (conversation["conversation"]["speaker_a"], conversation["conversation"]["speaker_b"]):
            term = terms(speaker)[0]
            shares[speaker] = round(sum(term in found_terms for found_terms in turns) / len(turns), 3)
        found.append({"conversation": conversation["sample_id"], "turns": len(turns), "shares": shares})
    return found


def long_histories(tokens: int, histories: int, seed: int, share: float = SHIPPED) -> dict:
    """The questions of `histories` long histories whose embedded text leaves a word out, at `share`."""
    made = [history(seed + i, tokens, 4, inside=True) for i in range(histories)]
    changed = []
    with (
        tempfile.TemporaryDirectory() as folder,
        Archive.open(Path(folder) / "long.db") as archive,
        mock.patch.object(semantic, "COMMON_SHARE", share),
    ):
        admit_histories(archive, made)
        for number, made_history in enumerate(made):
            context = _context(archive, history_project(number))
            for fact in made_history.facts:
                embedded = semantic.embedded_query(context, fact.question)
                if embedded != fact.question:
                    changed.append({"question": fact.question, "embedded": embedded})
    return {"questions": sum(len(h.facts) for h in made), "wordsLeftOut": len(changed), "changed": changed}


def near_cost(db: Path, count: int) -> dict:
    """The milliseconds `common_near` takes a query, after the query's lexical search (as
    `cwa/retrieve/search.py` asks it before embedding), and the queries it leaves a word out of."""
    from cwa.retrieve.intent import answer_words, cues
    from cwa.retrieve.search import RANKER_POOL, find_candidates

    spent, changed = [], 0
    with Archive.open(db) as archive:
        for query in ["warm up", *lexical_queries(count)]:
            context = _context(archive, PROJECTS["coding"])
            answers = answer_words(query, cues(query).direction)
            _, qterms, stages = find_candidates(context, query, 10, pool=RANKER_POOL, answers=answers)
            near = semantic.near_candidates(stages.ranked)
            distinct = list(dict.fromkeys(qterms))
            started = time.perf_counter()
            common = semantic.common_near(context, distinct, near)
            if query != "warm up":
                spent.append((time.perf_counter() - started) * 1000)
                changed += bool(common)
    return {"queries": count, "commonNearLatency": latency(spent), "queriesWithAWordLeftOut": changed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    parser.add_argument(
        "--shares", default=None, help="default 1,0.5,0.3,0.2,0.1; with --long one share (default: shipped)"
    )
    parser.add_argument("--long", type=int, default=None, metavar="TOKENS")
    parser.add_argument("--histories", type=int, default=8)
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--cost", type=Path, default=None, metavar="ARCHIVE")
    parser.add_argument("--speakers", action="store_true", help="each speaker's share of its conversation's turns")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.speakers:
        found = speaker_shares(args.data)
        print(json.dumps(found, indent=2) if args.json else "\n".join(str(f) for f in found))
        return
    if args.cost:
        found = near_cost(args.cost, args.queries)
        print(json.dumps(found, indent=2) if args.json else found)
        return
    if args.long:
        share = float(args.shares.split(",")[0]) if args.shares else SHIPPED
        found = long_histories(args.long, args.histories, args.seed, share)
        if args.json:
            print(json.dumps(found, indent=2))
        else:
            print(f"{found['wordsLeftOut']} of {found['questions']} questions embedded without a word")
            for item in found["changed"]:
                print(f"  {item['question']!r} -> {item['embedded']!r}")
        return
    report = run(args.data, [float(s) for s in (args.shares or "1,0.5,0.3,0.2,0.1").split(",")])
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['questions']} questions, semantic candidates alone")
    for share, figures in report["shares"].items():
        print(f"  share {share:>4}: " + " / ".join(f"{k} {v:.4f}" for k, v in figures.items()))
    print("  left out most at the shipped share:", ", ".join(f"{w} ({n})" for w, n in report["leftOutMost"]))


if __name__ == "__main__":
    main()
