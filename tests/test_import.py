"""`cwa import claude|codex|opencode|pi`: each client's own session store (fixtures written in the
client's layout: tests/capture_fixtures.py) becomes the session engine's turn documents, with the
client's session ids, lineage, projects and timestamps; a re-run adds nothing, a grown transcript
adds only its new turns, a half-written last line waits, what cannot be read is named."""

from __future__ import annotations

import json
import os
from pathlib import Path

import apsw
import pytest
from capture_fixtures import ClaudeSession, CodexRollout, OpenCodeStore, pi_session, stamp
from conftest import derived_rows, hermetic_env, row_counts, run_cwa

from cwa.api import Archive


def _import(env: dict[str, str], *args: str) -> tuple[int, dict]:
    done = run_cwa(["import", *args, "--json"], env)
    assert done.stdout, done.stderr.decode()
    return done.returncode, json.loads(done.stdout)


def _hit(db: Path, query: str, project: Path) -> dict | None:
    with Archive.open(db) as archive:
        results = archive.search({"query": query, "project": os.path.realpath(project)})["results"]
    return results[0] if results else None


def _turns(db: Path) -> int:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute("SELECT count(*) FROM documents WHERE kind = 'turn' AND state = 'live'").fetchone()[0]
    finally:
        conn.close()


def _parents(db: Path) -> dict[str, str | None]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = conn.execute(
            "SELECT s.session_key, p.session_key FROM sessions AS s LEFT JOIN sessions AS p ON p.id = s.parent_id"
        ).fetchall()
    finally:
        conn.close()
    return dict(rows)


@pytest.fixture
def setup(tmp_path: Path):
    project = tmp_path / "work" / "shop"
    project.mkdir(parents=True)
    db = tmp_path / "archive.db"
    return tmp_path / "home", project, db, hermetic_env(tmp_path, db)


def test_claude_code_sessions_subagents_forks_compaction_and_growth(setup):
    home, project, db, env = setup
    main = ClaudeSession(home, project, "11111111-aaaa")
    main.write(
        *main.turn(
            "the payments worker crashes",
            "grep -n ERR-7781 logs/worker.log",
            "worker.log:12: ERR-7781 ledger lock timeout",
            "It is ERR-7781, a ledger lock timeout.",
        )
    )
    main.write({"type": "hologram", "timestamp": stamp(5), "sessionId": main.session})  # a type no release wrote
    main.write(*main.compaction("Summary: we found ERR-7781 in the payments worker."))
    main.write(
        *main.turn("resumed: fix the lock", "sed -i s/30/90/ cfg/lock.toml", "", "Raised the lock timeout to 90 s.")
    )
    main.subagent_file(
        "a1", "search the tests", "pytest -x tests/flaky", "FAILED flaky-test-55", "flaky-test-55 fails."
    )
    fork = ClaudeSession(home, project, "22222222-bbbb", minute=100)
    copied = main.user("the payments worker crashes")  # a fork starts with its parent's history
    fork.write(copied, *fork.turn("in the fork: try a retry loop", "echo retry", "retry-ok-3141", "Retrying works."))
    partial = json.dumps(fork.user("PARTIAL-9911 still being written"))
    with fork.path.open("a") as out:
        out.write(partial[:40])  # the client is still writing this line

    code, summary = _import(env, "claude")
    assert code == 13, summary  # unsupported-format: the unknown line is named, the rest imported
    assert [(p["file"], p["line"], p["reason"]) for p in summary["problems"]] == [(str(main.path), 9, "unknown-type")]
    assert summary["sources"] == 3 and summary["read"] == 3 and summary["sessions"] == 3 and summary["documents"] > 0
    assert summary["termCountsKept"] == 0  # no term is in 5,000 windows of so small an archive

    hit = _hit(db, "ERR-7781 ledger lock timeout", project)
    assert hit["source"]["sessionId"] == main.session and hit["kind"] == "turn"
    assert hit["createdAt"] == stamp(1)  # the prompt's own time
    assert _hit(db, "flaky-test-55", project)["source"]["sessionId"] == "11111111-aaaa/agent-a1"
    assert _hit(db, "retry-ok-3141", project)["source"]["sessionId"] == fork.session
    assert _hit(db, "PARTIAL-9911", project) is None
    assert _hit(db, "Raised the lock timeout", project)["source"]["sessionId"] == main.session  # after compaction
    parents = _parents(db)
    assert parents["11111111-aaaa/agent-a1"] == main.session and parents[fork.session] == main.session
    assert parents[main.session] is None
    with Archive.open(db) as archive:  # recall is the exact bytes of the transcript's tool output
        text = archive.get({"documentId": hit["documentId"]})["text"]
    assert "worker.log:12: ERR-7781 ledger lock timeout" in text and "[toolCall Bash id=" in text

    before = _turns(db)
    code, again = _import(env, "claude")
    assert code == 0 and again["unchanged"] == 3 and again["read"] == 0 and again["documents"] == 0
    assert _turns(db) == before

    with fork.path.open("a") as out:  # the line is finished, and the user asks once more
        out.write(partial[40:] + "\n")
        out.writelines(json.dumps(line) + "\n" for line in fork.turn("and the retry count?", "echo 3", "3", "Three."))
    code, grown = _import(env, "claude")
    assert code == 0 and grown["read"] == 1 and grown["unchanged"] == 2
    assert _hit(db, "PARTIAL-9911", project)["source"]["sessionId"] == fork.session
    # the retry turn, the finished partial prompt (a group of its own) and the new turn; nothing again
    assert _turns(db) - before == grown["documents"] <= 3


def test_codex_rollouts_with_resume_compaction_and_a_fork(setup):
    home, project, db, env = setup
    codex_home = home / ".codex"
    env["CODEX_HOME"] = str(codex_home)
    rollout = CodexRollout(codex_home, project, "0199aaaa-1111")
    rollout.write(*rollout.turn("why is CI red", "pytest -q", "E   KeyError: 'region-eu-9'", "A missing region key."))
    rollout.write(rollout.entry("compacted", {"message": "Summary: CI fails on region-eu-9."}))
    rollout.write(rollout.entry("hologram", {}))
    fork = CodexRollout(codex_home, project, "0199bbbb-2222", minute=50, forked_from_id=rollout.thread)
    fork.write(*fork.turn("try the eu-west default", "make test", "passed 212", "All 212 pass with the default."))

    code, summary = _import(env, "codex")
    assert code == 13 and summary["problems"][0]["reason"] == "unknown-type"
    assert summary["problems"][0]["line"] == 14 and summary["problems"][0]["file"] == str(rollout.path)
    hit = _hit(db, "KeyError region-eu-9", project)
    assert hit["source"]["sessionId"] == rollout.thread
    assert _parents(db)[fork.thread] == rollout.thread
    assert _hit(db, "environment_context", project) is None  # Codex's own notes are not the user's words

    before = _turns(db)
    rollout.write(*rollout.turn("resumed: add the key", "echo fixed", "region-eu-9 added", "Added."))  # codex resume
    code, grown = _import(env, "codex")
    assert grown["read"] == 1 and grown["unchanged"] == 1
    assert code == 13 and grown["problems"] == summary["problems"]  # read again, named again
    assert _turns(db) == before + 1 == before + grown["documents"]
    assert _hit(db, "region-eu-9 added", project)["source"]["sessionId"] == rollout.thread


def test_opencode_database_sessions_subagents_and_compaction(setup):
    home, project, db, env = setup
    env["XDG_DATA_HOME"] = str(home / ".local" / "share")
    store = OpenCodeStore(home / ".local" / "share")
    store.session("ses_main", project)
    store.turn(
        "ses_main", "index the orders table", "psql -c 'create index'", "CREATE INDEX orders_by_day_77", "Indexed."
    )
    store.session("ses_child", project, parent="ses_main")  # the task tool's subagent
    store.turn("ses_child", "explore the schema", "ls migrations", "0042_orders_archive.sql", "Found it.")
    store.message(
        "ses_main",
        {"role": "assistant", "summary": True, "finish": "stop"},
        [{"type": "text", "text": "Summary: orders_by_day_77 was created."}],
    )
    store.message("ses_main", {"role": "user"}, [{"type": "hologram", "text": "?"}])

    code, summary = _import(env, "opencode")
    assert code == 13 and summary["problems"][0]["reason"] == "unknown-type"
    assert summary["sessions"] == 2 and summary["sources"] == 2
    assert _hit(db, "orders_by_day_77", project)["source"]["sessionId"] == "ses_main"
    assert _hit(db, "0042_orders_archive", project)["source"]["sessionId"] == "ses_child"
    assert _parents(db)["ses_child"] == "ses_main"

    before = _turns(db)
    store.turn("ses_child", "and the archive job?", "cat jobs/archive.py", "def archive_orders_nightly", "Nightly.")
    code, grown = _import(env, "opencode")
    assert code == 0 and grown["read"] == 1 and grown["unchanged"] == 1
    assert _turns(db) == before + 1


def test_pi_session_files_and_forks(setup):
    home, project, db, env = setup
    agent = home / ".pi" / "agent"
    parent = pi_session(
        agent,
        project,
        "pi-parent",
        [("deploy fails", "kubectl rollout status", "ImagePullBackOff x9", "The image tag is wrong.")],
    )
    pi_session(
        agent,
        project,
        "pi-fork",
        [("use tag v2", "kubectl set image", "rolled out v2-stable", "Done.")],
        parent_file=parent,
    )
    code, summary = _import(env, "pi")
    assert code == 0 and summary["sessions"] == 2 and summary["problems"] == []
    assert _hit(db, "ImagePullBackOff", project)["source"]["sessionId"] == "pi-parent"
    assert _parents(db)["pi-fork"] == "pi-parent"
    code, again = _import(env, "pi")
    assert again["documents"] == 0 and again["unchanged"] == 2


def test_a_broken_line_refuses_its_transcript_only_and_dry_run_writes_nothing(setup):
    home, project, db, env = setup
    good = ClaudeSession(home, project, "33333333-cccc")
    good.write(*good.turn("list the queues", "rabbitmqctl list_queues", "orders 17", "17 in orders."))
    broken = ClaudeSession(home, project, "44444444-dddd")
    broken.write(*broken.turn("first", "echo one", "one-unique-out", "One."))
    with broken.path.open("a") as out:
        out.write("{not json\n")
    broken.write(*broken.turn("second", "echo two", "two", "Two."))

    code, dry = _import(env, "claude", "--dry-run")
    assert dry["dryRun"] is True and dry["documents"] == 0 and dry["sessions"] == 1
    assert not db.exists() or row_counts(db).get("documents", 0) == 0

    code, summary = _import(env, "claude")
    assert code == 13
    assert [(p["file"], p["line"], p["reason"]) for p in summary["problems"]] == [(str(broken.path), 9, "bad-json")]
    assert _hit(db, "rabbitmqctl list_queues", project) is not None
    assert _hit(db, "one-unique-out", project) is None  # nothing of the refused transcript


def test_since_paths_and_bad_input(setup, tmp_path):
    home, project, db, env = setup
    old = ClaudeSession(home, project, "55555555-eeee")
    old.write(*old.turn("an old question", "echo old", "old-answer-1", "Old."))
    code, summary = _import(env, "claude", "--since", "2026-12-01")
    assert code == 0 and summary["olderThanSince"] == 1 and summary["documents"] == 0
    code, summary = _import(env, "claude", str(old.path), "--project", "/elsewhere")
    assert code == 0 and summary["documents"] == 1  # not recorded as read while --since left it out
    with Archive.open(db) as archive:
        assert archive.search({"query": "old-answer-1", "project": "/elsewhere"})["results"]
    done = run_cwa(["import", "claude", str(tmp_path / "missing.jsonl")], env)
    assert done.returncode == 2 and b"does not exist" in done.stderr
    done = run_cwa(["import", "codex", "--since", "yesterday"], env)
    assert done.returncode == 2 and b"--since" in done.stderr


def test_an_import_keeps_the_common_terms_counts_so_the_next_search_counts_none(setup, monkeypatch):
    # After archiving turns, `cwa import` keeps every common term's window count, as a maintenance
    # pass does; a dry run and a run that archives nothing keep none. (The threshold is lowered
    # here: the archive a test can build holds far fewer than 5,000 windows.)
    from cwa.capture import importer
    from cwa.store import term_counts

    monkeypatch.setattr(term_counts, "COMMON_TERM_WINDOWS", 3)
    home, project, db, env = setup
    session = ClaudeSession(home, project, "33333333-cccc")
    for n in range(6):
        session.write(*session.turn(f"check shard {n} of the ledger", f"ledger-check {n}", f"ledger ok {n}", "Fine."))
    units = importer.sources("claude", [], {**env, "HOME": str(home)})
    kept = "SELECT term FROM term_counts ORDER BY term"
    with Archive.open(db) as archive:
        dry = importer.import_sources(archive, "claude", units, dry_run=True)
        assert importer.keep_common_terms(archive, dry) == 0 and archive.conn.execute(kept).fetchall() == []
        summary = importer.import_sources(archive, "claude", units)
        assert summary.documents == 6
        assert importer.keep_common_terms(archive, summary) > 0
        terms = [t for (t,) in archive.conn.execute(kept)]
        assert "ledger" in terms and "shard" in terms
        again = importer.import_sources(archive, "claude", importer.sources("claude", [], {**env, "HOME": str(home)}))
        assert again.documents == 0 and importer.keep_common_terms(archive, again) == 0


# What a turn document's indexing derives, comparable across archives (window ids included: the
# queue is indexed in document order, as synchronous admission indexes).
def _lint_turns(home: Path, project: Path, session_id: str, turns: int) -> None:
    session = ClaudeSession(home, project, session_id)
    for n in range(turns):
        output = "\n".join(
            f"src/ledger_{n % 7}/shard_{k}.py:{k + 3}: E501 LedgerError in ShardPolicy" for k in range(9)
        )
        session.write(*session.turn(f"check ledger shard {n}", "make lint", output, f"Shard {n} checked."))


def test_an_import_indexes_its_turns_at_the_end_with_a_helper_as_admission_would(setup, tmp_path):
    # `cwa import` archives first and indexes the queue at its end, a helper process preparing the
    # documents: every turn is indexed, nothing is left queued, and the derived rows (window ids,
    # BM25F rows, anchor lists and dictionary, cues, deflated chunks) are those that indexing each
    # document as it is admitted makes.
    from cwa.capture import importer
    from cwa.index import queue_worker

    home, project, db, env = setup
    turns = queue_worker.HELPER_MIN_DOCUMENTS + 16  # enough for the helper
    _lint_turns(home, project, "44444444-dddd", turns)
    code, summary = _import(env, "claude")
    assert code == 0 and summary["documents"] == turns and summary["indexed"] == turns
    with Archive.open(db) as archive:
        assert archive.status({})["indexQueue"]["documents"] == 0
    assert _hit(db, "ShardPolicy LedgerError shard_5", project) is not None

    alone = tmp_path / "alone.db"  # the same store imported in process, each turn indexed as admitted
    with Archive.open(alone) as archive:
        assert archive.index_worker is None
        units = importer.sources("claude", [], {**env, "HOME": str(home)})
        assert importer.import_sources(archive, "claude", units).documents == turns
    assert derived_rows(db) == derived_rows(alone)


def test_an_import_indexes_between_its_batches_what_the_helper_prepared(setup, tmp_path, monkeypatch):
    # A batch a group of turns: after each commit the import hands the helper what it queued and
    # writes what the helper prepared (QueueIndexer.step, as `cwa import` runs it), the end indexes
    # the rest; the derived rows are those of indexing each turn as it is admitted.
    from cwa.capture import importer
    from cwa.index import queue_worker

    monkeypatch.setattr(importer, "BULK_SECONDS", 0.0)
    home, project, db, env = setup
    turns = 3 * queue_worker.HELPER_MIN_DOCUMENTS
    _lint_turns(home, project, "66666666-ffff", turns)
    units = importer.sources("claude", [], {**env, "HOME": str(home)})
    with Archive.open(db) as archive:
        archive.index_worker = queue_worker.IndexAtEnd()
        indexer = queue_worker.QueueIndexer(archive.conn, str(archive.path), archive.handlers, archive.clock)
        stepped: list[int] = []

        def committed() -> None:
            indexer.step(0.5)
            stepped.append(indexer.done)

        assert importer.import_sources(archive, "claude", units, committed=committed).documents == turns
        assert indexer.preparer.helper is not None  # started once HELPER_MIN_DOCUMENTS waited
        assert indexer.finish() == turns and archive.status({})["indexQueue"]["documents"] == 0
    assert len(stepped) >= turns - 1
    assert "shard 150" in _hit(db, "check ledger shard 150", project)["snippet"]

    alone = tmp_path / "alone.db"
    with Archive.open(alone) as archive:
        assert importer.import_sources(archive, "claude", units).documents == turns
    assert derived_rows(db) == derived_rows(alone)


def test_indexing_at_the_end_when_the_helper_fails_and_what_an_earlier_import_left_queued(setup, monkeypatch):
    # A helper that fails part-way (it ends) hands over what it prepared; this process
    # prepares the rest, and every document is indexed once. Documents an earlier import left
    # queued (it was stopped before its end) are indexed by the next one, even when it archives
    # nothing new.
    from cwa.capture import importer
    from cwa.index import queue_worker
    from cwa.index.prepare_helper import HelperFailed
    from cwa.store.connection import open_read_only
    from cwa.store.index_queue import prepare_queued

    home, project, db, env = setup
    _lint_turns(home, project, "55555555-eeee", 12)
    units = importer.sources("claude", [], {**env, "HOME": str(home)})
    with Archive.open(db) as archive:
        archive.index_worker = queue_worker.IndexAtEnd()
        assert importer.import_sources(archive, "claude", units).documents == 12
        archive.index_worker = None
        assert archive.status({})["indexQueue"]["documents"] == 12  # stopped here: nothing indexed yet

        handed: list[int] = []

        class BreakingHelper:  # answers the first exchange, then ends as a helper that died would
            def __init__(self, path):
                self.conn, self.sent = open_read_only(path), []

            def send(self, chunk, deflate):
                self.sent.append((chunk, deflate))

            def receive(self):
                chunk, deflate = self.sent.pop(0)
                if handed:
                    raise HelperFailed("the helper ended")
                handed.extend(q[0] for q in chunk)
                return [prepare_queued(self.conn, archive.handlers, q, deflate) for q in chunk]

            def close(self):
                self.conn.close()

        monkeypatch.setattr(queue_worker, "HELPER_MIN_DOCUMENTS", 1)
        monkeypatch.setattr(queue_worker, "Helper", BreakingHelper)
        seen = []
        found = queue_worker.index_all_queued(
            archive.conn, str(db), archive.handlers, archive.clock, lambda done, total: seen.append((done, total))
        )
        assert len(handed) == queue_worker.HELPER_CHUNK and found == 12 and seen[-1] == (12, 12)
        assert archive.status({})["indexQueue"]["documents"] == 0
        # each indexed once: a queued document gets its batch's generation then, and no generation
        # is left that no document names (a second indexing would leave one)
        generations = archive.conn.execute(
            "SELECT (SELECT count(*) FROM documents WHERE index_generation IS NULL),"
            " (SELECT count(DISTINCT index_generation) FROM documents), (SELECT count(*) FROM index_generations)"
        ).fetchone()
        assert generations[0] == 0 and generations[1] == generations[2]
    assert _hit(db, "ShardPolicy LedgerError shard_5", project) is not None

    _lint_turns(home, project, "66666666-ffff", 3)
    with Archive.open(db) as archive:  # an import stopped before its end: its turns wait
        archive.index_worker = queue_worker.IndexAtEnd()
        later = importer.sources("claude", [], {**env, "HOME": str(home)})
        assert importer.import_sources(archive, "claude", later).documents == 3
    code, summary = _import(env, "claude")  # nothing new to archive: what waited is indexed
    assert code == 0 and summary["documents"] == 0 and summary["indexed"] == 3
