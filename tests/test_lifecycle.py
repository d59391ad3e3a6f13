"""Retention, pins, leases, context protection, redaction, maintenance and the disk guard, with a
controllable clock and real archive files."""

from __future__ import annotations

import os

import pytest
from conftest import DISK_GUARD_OFF, hermetic_env, run_cwa

from cwa.api import Archive
from cwa.config import load_settings
from cwa.errors import EXIT_CODES, Conflict, DiskLow, NotFound
from cwa.timestamps import shift

P = "/work/life"
T0 = "2026-01-01T00:00:00.000Z"
DAY = 86_400


class Clock:
    def __init__(self, start: str = T0) -> None:
        self.start = self.now = start

    def __call__(self) -> str:
        return self.now

    def at(self, days: float) -> None:
        self.now = shift(self.start, days * DAY)


def settings(tmp_path, **env):
    base = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), **DISK_GUARD_OFF}
    return load_settings(None, env={**base, **{k: str(v) for k, v in env.items()}})


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def archive(tmp_path, clock):
    with Archive.open(tmp_path / "archive.db", settings=settings(tmp_path), clock=clock) as opened:
        yield opened


def admit(archive, text, kind="turn", session="s1", role="user", **extra):
    return archive.admit(
        {
            "project": P,
            "sessionId": session,
            "kind": kind,
            "createdAt": T0,
            "messages": [{"role": role, "text": text}],
            **extra,
        }
    )["documentId"]


def state(archive, document_id):
    return archive.get({"documentId": document_id})["state"]


def maintain_all(archive, limit=500):
    passes = []
    while True:
        passes.append(archive.call("maintain", {"limit": limit}))
        if not passes[-1]["more"]:
            return passes


def expires_on(archive, clock, ids, day: float) -> None:
    """`ids` are all live just before `day` and all expired just after (a full maintenance run on
    each side)."""
    for moment, wanted in ((day - 0.01, "live"), (day + 0.01, "expired")):
        clock.at(moment)
        maintain_all(archive)
        assert {state(archive, i) for i in ids} == {wanted}, (moment, wanted)


def found(archive, query, session=None):
    params = {"project": P, "query": query, "limit": 10, "semanticPolicy": "never"}
    return {r["documentId"] for r in archive.search(params)["results"]}


# --- retention by class -------------------------------------------------------------------------


def test_each_class_expires_on_time_and_durable_never(archive, clock):
    tool = admit(archive, "pytest output: 3 failed in test_cache_eviction", kind="tool-result", role="toolResult")
    summary = admit(archive, "Summary: the cache eviction work is half done", kind="summary", role="assistant")
    turn = admit(archive, "Let us look at the cache eviction policy today")
    decision = admit(archive, "Decision: evict least recently used entries first", kind="decision", role="assistant")
    for days, expected_expired in [
        (13.9, set()),
        (14.01, {tool}),
        (29.9, {tool}),
        (30.01, {tool, summary}),
        (89.9, {tool, summary}),
        (90.01, {tool, summary, turn}),
        (2000, {tool, summary, turn}),
    ]:
        clock.at(days)
        maintain_all(archive)
        expired = {d for d in (tool, summary, turn, decision) if state(archive, d) == "expired"}
        assert expired == expected_expired, days
    assert found(archive, "cache eviction") == {decision}  # expired documents leave every mode at once


def test_zero_days_never_expires_and_a_changed_setting_replans(tmp_path, clock):
    path = tmp_path / "archive.db"
    with Archive.open(path, settings=settings(tmp_path), clock=clock) as archive:
        tool = admit(archive, "build log: linker warning about libfoo", kind="tool-result", role="toolResult")
    with Archive.open(path, settings=settings(tmp_path, CWA_EPHEMERAL_RETENTION_DAYS=0), clock=clock) as archive:
        clock.at(400)
        assert "ephemeral" in archive.call("maintain", {})["replannedClasses"]
        assert state(archive, tool) == "live"
    with Archive.open(path, settings=settings(tmp_path, CWA_EPHEMERAL_RETENTION_DAYS=500), clock=clock) as archive:
        maintain_all(archive)
        assert state(archive, tool) == "live"
        clock.at(500.01)
        maintain_all(archive)
        assert state(archive, tool) == "expired"


def test_expired_recall_says_expired_and_keeps_metadata(archive, clock):
    tool = admit(archive, "ERR_DISK_QUOTA while writing the artifact cache", kind="tool-result", role="toolResult")
    locator = archive.search({"project": P, "query": "ERR_DISK_QUOTA", "leaseSeconds": 0})["results"][0]["locator"]
    clock.at(15)
    maintain_all(archive)
    assert archive.recall({"locator": locator})["status"] == "expired"
    assert archive.recall({"documentId": tool})["status"] == "expired"
    header = archive.get({"documentId": tool})
    assert header["state"] == "expired" and header["kind"] == "tool-result"


# --- protections ----------------------------------------------------------------------------------


def test_pins_hold_until_unpinned(archive, clock):
    tool = admit(archive, "flaky test log kept for the postmortem", kind="tool-result", role="toolResult")
    assert archive.call("pin", {"documentId": tool})["pinned"] is True
    clock.at(100)
    maintain_all(archive)
    assert state(archive, tool) == "live"
    archive.call("unpin", {"documentId": tool})
    maintain_all(archive)  # long past due: expires on the next pass
    assert state(archive, tool) == "expired"
    with pytest.raises(Conflict):
        archive.call("pin", {"documentId": tool})  # nothing left to pin
    with pytest.raises(NotFound):
        archive.call("pin", {"documentId": "doc-nope"})


def test_a_search_lease_postpones_expiry_until_it_ends(archive, clock):
    tool = admit(archive, "lease me: ERR_LEASE_TEST output", kind="tool-result", role="toolResult")
    clock.at(13.99)
    archive.search({"project": P, "query": "ERR_LEASE_TEST", "leaseSeconds": 3600})
    clock.at(14.01)
    result = archive.call("maintain", {})
    assert result["expiryPostponed"] == 1 and state(archive, tool) == "live"
    clock.at(14.01 + 2 / 24)  # the lease ended an hour ago
    maintain_all(archive)
    assert state(archive, tool) == "expired"


def test_context_protection_is_per_client_and_recovers_when_it_lapses(archive, clock):
    tool = admit(archive, "protected tool output for the live context", kind="tool-result", role="toolResult")
    other = admit(archive, "another tool output nobody protects", kind="tool-result", role="toolResult")
    week = {"documents": [{"documentId": tool}], "ttlSeconds": 7 * DAY}
    for day in (0, 6, 12):  # pi-1 renews its live context's protection every few days
        clock.at(day)
        archive.call("protect", {"clientId": "pi-1", **week})
    archive.call("protect", {"clientId": "pi-2", **week})
    clock.at(15)
    archive.call("release", {"clientId": "pi-2"})  # closing one client never releases another's
    maintain_all(archive)
    assert state(archive, tool) == "live" and state(archive, other) == "expired"
    clock.at(19.01)  # pi-1 stopped renewing at day 12: its protection lapsed at day 19 ...
    maintain_all(archive)
    assert state(archive, tool) == "live"
    expires_on(archive, clock, [tool], 19 + 14)  # ... and the class's 14 days count from there


def test_retention_counts_from_archiving_not_from_an_old_creation_time(archive, clock):
    clock.at(30)  # archived on day 30 a tool output written on day 0
    late = admit(archive, "an old tool output archived late", kind="tool-result", role="toolResult")
    expires_on(archive, clock, [late], 30 + 14)


def test_a_released_protection_restarts_the_retention_clock(archive, clock):
    tool = admit(archive, "tool output a window showed for ten days", kind="tool-result", role="toolResult")
    archive.call("protect", {"clientId": "w", "documents": [{"documentId": tool}], "ttlSeconds": 7 * DAY})
    clock.at(5)
    archive.call("protect", {"clientId": "w", "documents": [{"documentId": tool}], "ttlSeconds": 7 * DAY})
    clock.at(10)
    archive.call("protect", {"clientId": "w", "documents": []})  # it left the window on day 10
    expires_on(archive, clock, [tool], 10 + 14)


def test_a_lapsed_protection_counts_even_before_maintenance_deletes_it(archive, clock):
    tools = [
        admit(archive, f"tool output {n} of a window that went quiet", kind="tool-result", role="toolResult")
        for n in range(3)
    ]
    for number, tool in enumerate(tools):
        archive.call("protect", {"clientId": f"w{number}", "documents": [{"documentId": tool}], "ttlSeconds": DAY})
    clock.at(1 + 14 - 0.01)  # every protection lapsed on day 1; a pass deletes only one of them
    archive.call("maintain", {"limit": 1})
    assert {state(archive, tool) for tool in tools} == {"live"}
    assert archive.conn.execute("SELECT count(*) FROM context_protections").fetchone()[0] == 2  # not deleted yet


def test_protect_validates_all_or_nothing(archive):
    real = admit(archive, "a real document")
    with pytest.raises(NotFound):
        archive.call("protect", {"clientId": "c", "documents": [{"documentId": real}, {"documentId": "doc-x"}]})
    assert archive.status({"archive": True})["archive"]["contextProtections"] == 0
    too_many = [{"documentId": real}] * 1001
    with pytest.raises(Exception) as raised:
        archive.call("protect", {"clientId": "c", "documents": too_many})
    assert raised.value.code in ("limit-exceeded", "invalid-request")


# --- maintenance ----------------------------------------------------------------------------------


def test_maintenance_is_bounded_and_resumable(archive, clock):
    ids = [
        admit(archive, f"tool output number {i} with its own words w{i}", kind="tool-result", role="toolResult")
        for i in range(25)
    ]
    clock.at(15)
    passes = maintain_all(archive, limit=10)
    assert [p["expired"] for p in passes][:3] == [10, 10, 5]
    assert all(p["expired"] <= 10 and p["purged"] <= 10 for p in passes)
    assert passes[0]["more"] is True and passes[-1]["more"] is False
    assert all(state(archive, d) == "expired" for d in ids)


def test_storage_shrinks_after_maintenance_and_vacuum(archive, clock, tmp_path):
    import random

    rng = random.Random(5)
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "lambda"]
    for i in range(40):
        body = " ".join(rng.choice(words) + str(rng.randrange(10**6)) for _ in range(6000))
        admit(archive, f"log {i}: {body}", kind="tool-result", role="toolResult")
    admit(archive, "a conversation turn that stays")
    path = tmp_path / "archive.db"
    archive.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = os.path.getsize(path)
    clock.at(15)
    passes = maintain_all(archive)
    assert any(p["space"]["action"] == "incremental-vacuum" for p in passes)
    incremental = os.path.getsize(path)
    assert incremental < before / 2, (before, incremental)  # pages handed back without a VACUUM
    result = archive.call("maintain", {"vacuum": True})
    after = os.path.getsize(path)
    assert result["space"]["action"] == "vacuum"
    assert after <= incremental and after < before / 3, (before, after)
    assert archive.conn.execute("SELECT count(*) FROM chunks").fetchone()[0] <= 2
    assert archive.status({"archive": True})["archive"]["autoVacuum"] == "incremental"


# --- redaction ------------------------------------------------------------------------------------


def test_redaction_removes_a_session_now_and_its_bytes_after_maintenance(archive, clock):
    secret = "SENTINEL-7f3a the password rotation plan for the vault, in secrets/vault_plan.yaml"
    gone = admit(archive, secret, session="s1")
    also = admit(
        archive, "The vault rotation runs nightly: RotateVault", session="s1", kind="tool-result", role="toolResult"
    )
    kept = admit(archive, "The vault audit happens in session two: RotateVault", session="s2")
    locator = archive.search({"project": P, "query": "SENTINEL-7f3a", "leaseSeconds": 600})["results"][0]["locator"]
    archive.call("pin", {"documentId": gone})
    hint = archive.call(
        "preflight",
        {"project": P, "sessionId": "s3", "messageKey": "m1", "text": "what did we say before about SENTINEL-7f3a?"},
    )
    assert "SENTINEL" in hint["modelVisibleText"]

    preview = archive.call("redact", {"project": P, "sessionId": "s1"})
    assert preview["documents"] == 2 and preview["redacted"] == 0
    assert found(archive, "vault") == {gone, also, kept}  # a preview changes nothing
    with pytest.raises(Conflict):
        archive.call("redact", {"project": P, "sessionId": "s1", "confirm": "redact-000000000000000000000000"})
    done = archive.call("redact", {"project": P, "sessionId": "s1", "confirm": preview["confirm"]})
    assert done["redacted"] == 2

    assert found(archive, "vault") == {kept}  # search, at once, pin and lease notwithstanding
    assert archive.recall({"locator": locator})["status"] == "missing"
    replay = archive.call(
        "preflight",
        {"project": P, "sessionId": "s3", "messageKey": "m1", "text": "what did we say before about SENTINEL-7f3a?"},
    )
    assert replay["modelVisibleText"] == "" and replay["diagnostics"]["reason"] == "source-redacted"
    fresh = archive.call(
        "preflight",
        {"project": P, "sessionId": "s4", "messageKey": "m1", "text": "what did we say before about SENTINEL-7f3a?"},
    )
    assert "SENTINEL" not in fresh["modelVisibleText"]

    def sentinel_bytes():
        return archive.conn.execute(
            "SELECT count(*) FROM chunks WHERE instr(sqlar_uncompress(data, byte_length), ?) > 0", (b"SENTINEL-7f3a",)
        ).fetchone()[0]

    def anchor_texts():
        return {t for (t,) in archive.conn.execute("SELECT text FROM anchor_texts")}

    assert sentinel_bytes() == 1  # bytes go with maintenance
    assert {"secrets/vault_plan.yaml", "RotateVault"} <= anchor_texts()
    maintain_all(archive)
    assert sentinel_bytes() == 0
    # the anchor dictionary forgets a text only the purged documents held, keeps a shared one
    assert not any("vault_plan" in t for t in anchor_texts()) and "RotateVault" in anchor_texts()
    assert found(archive, "RotateVault") == {kept}
    assert (
        archive.conn.execute("SELECT count(*) FROM hint_records WHERE model_visible_text LIKE '%SENTINEL%'").fetchone()[
            0
        ]
        == 0
    )
    assert found(archive, "audit") == {kept} and archive.recall({"documentId": kept})["status"] == "resolved"


def test_redact_cli_prints_a_token_then_redacts(tmp_path):
    db = tmp_path / "a.db"
    env = hermetic_env(tmp_path, db)
    with Archive.open(db) as archive:
        admit(archive, "cli redaction target", session="sx")
    first = run_cwa(["redact", "--project", P, "--session", "sx"], env)
    assert first.returncode == 0
    token = first.stdout.decode().split("--confirm ")[1].split()[0]
    second = run_cwa(["redact", "--project", P, "--session", "sx", "--confirm", token], env)
    assert second.returncode == 0 and b"redacted 1 document" in second.stdout
    stale = run_cwa(["redact", "--project", P, "--confirm", "redact-nope", "--json"], env)
    assert stale.returncode == EXIT_CODES["conflict"]


# --- disk guard and status ------------------------------------------------------------------------


def test_disk_low_refuses_admission_before_writing_and_reads_still_work(tmp_path, clock):
    path = tmp_path / "archive.db"
    with Archive.open(path, settings=settings(tmp_path), clock=clock) as archive:
        admit(archive, "written while there was room")
    huge = 1 << 30  # MiB: far above any free space
    with Archive.open(path, settings=settings(tmp_path, CWA_DISK_CRITICAL_MEBIBYTES=huge), clock=clock) as archive:
        counts = archive.conn.execute(
            "SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks)"
        ).fetchone()
        with pytest.raises(DiskLow) as raised:
            admit(archive, "refused")
        assert raised.value.code == "disk-low" and raised.value.details["criticalBytes"] == huge << 20
        many = [
            {"project": "/p", "sessionId": "s", "kind": "turn", "messages": [{"role": "user", "text": f"bulk {n}"}]}
            for n in range(3)
        ]
        with pytest.raises(DiskLow) as raised:  # a bulk admission checks before its first document too
            archive.admit_many(many)
        assert raised.value.details["request"] == 0
        assert (
            archive.conn.execute("SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks)").fetchone()
            == counts
        )
        assert found(archive, "room")  # reads keep working
    env = {**hermetic_env(tmp_path, path), "CWA_DISK_CRITICAL_MEBIBYTES": str(huge)}
    out = run_cwa(
        ["admit", "--json"],
        env,
        stdin=b'{"project": "/p", "sessionId": "s", "kind": "turn", "messages": [{"role": "user", "text": "x"}]}',
    )
    assert out.returncode == EXIT_CODES["disk-low"] and b"disk-low" in out.stdout


def test_status_archive_reports_classes_bytes_and_protections(archive, clock):
    tool = admit(archive, "tool output for status", kind="tool-result", role="toolResult")
    admit(archive, "a turn for status")
    archive.call("pin", {"documentId": tool})
    archive.search({"project": P, "query": "status"})
    report = archive.status({"archive": True})["archive"]
    assert report["byClass"]["ephemeral"]["live"]["documents"] == 1
    assert report["byClass"]["conversation"]["live"]["documents"] == 1
    assert report["pinned"] == 1 and report["activeLeases"] == 1 and report["leasedDocuments"] == 2
    assert report["bytes"]["chunks"] > 0 and report["bytes"]["index"] > 0 and report["bytes"]["logical"] > 0
    # the canonical text's share holds its tables and every index of them, whatever the index's name
    canonical = archive.conn.execute(
        "SELECT sum(pgsize) FROM dbstat WHERE name IN "
        "(SELECT name FROM sqlite_schema WHERE tbl_name IN ('chunks', 'document_chunks'))"
    ).fetchone()[0]
    assert report["bytes"]["chunks"] == canonical
    assert report["nextExpiry"] == shift(T0, 90 * DAY)  # the turn; the pinned tool output has none


def test_get_of_an_expired_or_redacted_document_returns_no_text(archive, clock):
    redacted = admit(archive, "GET-SENTINEL in a session to redact", session="sr")
    tool = admit(archive, "GET-SENTINEL tool output that expires", kind="tool-result", role="toolResult")
    digests = {d: archive.get({"documentId": d})["textDigest"] for d in (redacted, tool)}
    token = archive.call("redact", {"project": P, "sessionId": "sr"})["confirm"]
    archive.call("redact", {"project": P, "sessionId": "sr", "confirm": token})
    clock.at(15)
    archive.call("maintain", {})
    for document_id, expected in ((redacted, "tombstoned"), (tool, "expired")):
        header = archive.get({"documentId": document_id})
        assert header["state"] == expected and header["available"] is False and "text" not in header
        # the header keeps the digest, although a one-chunk document's was its chunk's hash
        assert header["textDigest"] == digests[document_id] and len(digests[document_id]) == 64
        with pytest.raises(Conflict):
            archive.get({"documentId": document_id, "range": {"start": 0, "end": 5}})


def test_serve_runs_maintenance_periodically(tmp_path):
    import subprocess
    import sys
    import time

    import orjson

    db = tmp_path / "archive.db"
    with Archive.open(db, clock=Clock()) as archive:  # created and archived in January: long past 14 days
        tool = admit(archive, "an old tool output the server should expire", kind="tool-result", role="toolResult")
    env = hermetic_env(tmp_path, db)
    child = subprocess.Popen(
        [sys.executable, "-m", "cwa", "serve", "--no-background", "--maintenance-interval", "0.2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    try:
        seen = None
        for _ in range(50):
            child.stdin.write(
                orjson.dumps({"id": 1, "method": "get", "params": {"project": P, "documentId": tool}}) + b"\n"
            )
            child.stdin.flush()
            seen = orjson.loads(child.stdout.readline())["result"]["state"]
            if seen == "expired":
                break
            time.sleep(0.2)
        assert seen == "expired"
    finally:
        child.stdin.close()
        assert child.wait(timeout=30) == 0


def test_redacting_an_expired_document_still_forgets_its_metadata(archive, clock):
    tool = archive.admit(
        {
            "project": P,
            "sessionId": "sm",
            "kind": "tool-result",
            "createdAt": T0,
            "metadata": {"secret": "META-SENTINEL"},
            "messages": [{"role": "toolResult", "text": "output with metadata"}],
        }
    )["documentId"]
    clock.at(15)
    from cwa.store.connection import write_transaction
    from cwa.store.retention import expire_due, plan_of

    with write_transaction(archive.conn):  # expired and queued for purge, not purged yet
        assert expire_due(archive.conn, clock(), plan_of(archive.settings), 10)["expired"] == 1
    token = archive.call("redact", {"project": P, "sessionId": "sm"})["confirm"]
    archive.call("redact", {"project": P, "sessionId": "sm", "confirm": token})
    maintain_all(archive)
    header = archive.get({"documentId": tool})
    assert header["state"] == "tombstoned" and header["metadata"] is None


def test_cli_status_archive_maintain_vacuum_pin_and_catalog(tmp_path):
    db = tmp_path / "a.db"
    env = hermetic_env(tmp_path, db)
    with Archive.open(db, clock=Clock()) as archive:  # archived in January
        tool = admit(archive, "old tool output for the CLI", kind="tool-result", role="toolResult")
    with Archive.open(db) as archive:  # archived now
        archive.call("checkpoint", {"project": P, "sessionId": "s1", "text": "an input for the catalog " * 50})
    shown = run_cwa(["status", "--archive"], env)
    assert shown.returncode == 0 and b"ephemeral" in shown.stdout and b"auto_vacuum incremental" in shown.stdout
    pinned = run_cwa(["pin", tool], env)
    assert pinned.returncode == 0 and b"pinned" in pinned.stdout
    assert run_cwa(["unpin", tool, "--json"], env).returncode == 0
    swept = run_cwa(["maintain", "--vacuum"], env)
    assert swept.returncode == 0 and b"expired 1" in swept.stdout and b"(vacuum)" in swept.stdout
    listed = run_cwa(["catalog", "--session", "s1", "--project", P], env)
    assert listed.returncode == 0 and listed.stdout.startswith(b"[cwa checkpoint catalog ")
    missing = run_cwa(["pin", "doc-none", "--json"], env)
    assert missing.returncode == EXIT_CODES["not-found"] and b"Traceback" not in missing.stderr


def test_maintain_can_drain_the_embedding_queue_too(archive):
    for i in range(5):
        admit(archive, f"queued window number {i} about vector search")
    assert archive.call("maintain", {})["more"] is False  # nothing asked of the embeddings
    first = archive.call("maintain", {"embed": 3})
    assert first["embedded"] == 3 and first["embeddingPending"] == 2 and first["more"] is True
    second = archive.call("maintain", {"embed": 3})
    assert second["embedded"] == 2 and second["embeddingPending"] == 0 and second["more"] is False


def test_documents_from_before_the_schedule_are_planned_by_the_first_pass(archive, clock):
    old = admit(archive, "tool output archived before retention existed", kind="tool-result", role="toolResult")
    conn = archive.conn
    # the state migration 0006 leaves in an archive that already held documents
    conn.execute("DELETE FROM expiry_schedule")
    conn.execute("DELETE FROM meta WHERE key = 'retention_plan'")
    conn.execute("INSERT INTO meta (key, value) VALUES ('retention_backfill', 'needed')")
    new = admit(archive, "tool output archived after the upgrade", kind="tool-result", role="toolResult")
    assert conn.execute("SELECT count(*) FROM meta WHERE key = 'retention_plan'").fetchone()[0] == 0
    clock.at(15)
    first = archive.call("maintain", {})
    assert sorted(first["replannedClasses"]) == ["conversation", "derived", "ephemeral"]
    maintain_all(archive)
    assert state(archive, old) == "expired" and state(archive, new) == "expired"
    assert conn.execute("SELECT count(*) FROM meta WHERE key = 'retention_backfill'").fetchone()[0] == 0
    assert archive.call("maintain", {})["replannedClasses"] == []


def test_a_new_archive_needs_no_replanning(archive):
    admit(archive, "a first turn")
    assert archive.call("maintain", {})["replannedClasses"] == []


def test_a_postponed_entry_does_not_hide_work_still_due(archive, clock):
    ids = [admit(archive, f"tool output {i} with words w{i}", kind="tool-result", role="toolResult") for i in range(3)]
    clock.at(15)
    archive.call("protect", {"clientId": "c", "documents": [{"documentId": ids[0]}], "ttlSeconds": 7 * DAY})
    first = archive.call("maintain", {"limit": 2})  # postpones ids[0], expires ids[1]; ids[2] still due
    assert first["expiryPostponed"] == 1 and first["expired"] == 1 and first["more"] is True
    second = archive.call("maintain", {"limit": 2})
    assert second["expired"] == 1 and second["more"] is False
    assert [state(archive, d) for d in ids] == ["live", "expired", "expired"]


def test_a_gone_document_stays_unfindable_through_the_next_one_s_context(archive, clock):
    tool = admit(archive, "zanzibar quartz ledger: 3 entries reconciled", kind="tool-result", role="toolResult")
    reply = admit(archive, "All of them balance now.", role="assistant")
    assert found(archive, "zanzibar quartz") == {tool, reply}  # the reply through its context field
    indexed = archive.get({"documentId": reply})["generation"]
    clock.at(15)  # the tool result's class expires; the reply's does not
    maintain_all(archive)
    assert state(archive, tool) == "expired" and state(archive, reply) == "live"
    assert found(archive, "zanzibar quartz") == set()  # the purge indexed the reply again
    again = archive.get({"documentId": reply})["generation"]  # and marked it with a finished generation
    finished = "SELECT finished_at IS NOT NULL FROM index_generations WHERE id = ?"
    assert again > indexed and archive.conn.execute(finished, (again,)).fetchone()[0] == 1
    assert found(archive, "balance") == {reply}
