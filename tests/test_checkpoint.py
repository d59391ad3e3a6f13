"""The oversized-input archive checkpoint: exact, idempotent, all-or-nothing, with a bounded
preview and catalog that never show the middle."""

from __future__ import annotations

import blake3
import pytest
from conftest import hermetic_env, run_cwa

from cwa.api import Archive
from cwa.errors import EXIT_CODES, CwaError
from cwa.session.checkpoint import CATALOG_TOKENS, PART_BYTES, PREVIEW_TOKENS, split_parts
from cwa.tokens import estimate_tokens

P = "/work/ckpt"
SENTINEL = "MIDDLE-SENTINEL-5c1e"


def big_text(megabytes: float = 5) -> str:
    """Multibyte lines (accents, CJK, emoji) around one unique sentinel in the middle."""
    line = "Ünïcødé line {i}: 漢字かな混じり emoji 🎉 and plain words about the migration plan\n"
    lines, size, i = [], 0, 0
    while size < megabytes * (1 << 20):
        piece = line.format(i=i)
        lines.append(piece)
        size += len(piece.encode("utf-8"))
        i += 1
    lines.insert(len(lines) // 2, f"the one place that says {SENTINEL} exactly once\n")
    return "".join(lines)


def counts(archive):
    return archive.conn.execute(
        "SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks), (SELECT count(*) FROM windows)"
    ).fetchone()


def test_split_parts_is_utf8_safe_and_bounded():
    text = "a" * (PART_BYTES - 1) + "漢字🎉" * 10 + "tail"
    parts = split_parts(text)
    assert "".join(parts) == text
    assert all(len(p.encode("utf-8")) <= PART_BYTES for p in parts)
    assert len(parts) == 2 and parts[1].startswith("漢")  # the cut never splits a character


def test_five_mib_reassembles_exactly_after_reopening_and_never_shows_the_middle(tmp_path):
    text = big_text()
    path = tmp_path / "archive.db"
    with Archive.open(path) as archive:
        result = archive.call("checkpoint", {"project": P, "sessionId": "s1", "text": text})
        assert result["created"] is True and len(result["partIds"]) == 6
        before = counts(archive)
        again = archive.call("checkpoint", {"project": P, "sessionId": "s1", "text": text})
        assert again["rootId"] == result["rootId"] and again["partIds"] == result["partIds"]
        assert again["created"] is False and counts(archive) == before  # a retry adds no rows
        catalog = archive.call("catalog", {"project": P, "sessionId": "s1"})
    with Archive.open(path) as reopened:
        got = reopened.get({"documentId": result["rootId"]})
    assert got["text"] == text
    assert blake3.blake3(got["text"].encode("utf-8")).hexdigest() == result["catalogEntry"]["blake3"]
    assert result["catalogEntry"]["bytes"] == len(text.encode("utf-8"))
    preview = result["preview"]
    assert estimate_tokens(preview) <= PREVIEW_TOKENS and result["previewTokens"] <= PREVIEW_TOKENS
    assert preview.startswith(text[:200]) and preview.endswith(text[-100:])
    assert result["rootId"] in preview and f"({len(text.encode('utf-8'))} bytes)" in preview
    for shown in (preview, str(result["catalogEntry"]), catalog["text"]):
        assert SENTINEL not in shown and SENTINEL.lower() not in shown.lower()
    assert estimate_tokens(catalog["text"]) <= CATALOG_TOKENS
    assert [e["rootId"] for e in catalog["entries"]] == [result["rootId"]]


def test_a_failed_part_write_leaves_no_usable_root_and_a_retry_completes(tmp_path):
    text = big_text(2.5)
    with Archive.open(tmp_path / "archive.db") as archive:
        calls = []

        def failing(request):
            calls.append(request["kind"])
            if len(calls) == 2:
                raise OSError("disk went away")  # the 2nd part write fails
            return archive.admit(request)

        from cwa.session.checkpoint import archive_checkpoint

        with pytest.raises(OSError):
            archive_checkpoint(failing, P, "s1", text)
        roots = "SELECT count(*) FROM documents WHERE kind = 'checkpoint-root'"
        assert archive.conn.execute(roots).fetchone()[0] == 0 and "checkpoint-root" not in calls

        def silent(request):  # a write that returns nothing is a failure too
            return (
                {}
                if request["kind"] == "checkpoint-part" and request["messages"][0]["key"].endswith(":1")
                else archive.admit(request)
            )

        with pytest.raises(CwaError):
            archive_checkpoint(silent, P, "s1", text)
        assert archive.conn.execute(roots).fetchone()[0] == 0

        done = archive.call("checkpoint", {"project": P, "sessionId": "s1", "text": text})
        assert archive.conn.execute(roots).fetchone()[0] == 1
        assert archive.get({"documentId": done["rootId"]})["text"] == text


def test_small_input_previews_whole_and_a_foreign_summary_is_archived(tmp_path):
    with Archive.open(tmp_path / "archive.db") as archive:
        small = archive.call("checkpoint", {"project": P, "sessionId": "s1", "text": "short input, kept whole"})
        assert small["preview"] == "short input, kept whole" and len(small["partIds"]) == 1
        catalog = archive.call("catalog", {"project": P, "sessionId": "s1"})["text"]
        covered = archive.call(
            "checkpoint",
            {"project": P, "sessionId": "s1", "text": "next input", "previousSummary": "Earlier:\n" + catalog},
        )
        assert covered["previousSummary"] == {"archived": False, "documentId": None}
        tampered = catalog.replace("short", "shirt")
        foreign = archive.call(
            "checkpoint",
            {
                "project": P,
                "sessionId": "s1",
                "text": "third input",
                "previousSummary": "Summary of earlier work: " + tampered,
            },
        )
        assert foreign["previousSummary"]["archived"] is True
        summary = archive.get({"documentId": foreign["previousSummary"]["documentId"]})
        assert summary["kind"] == "summary" and "Summary of earlier work" in summary["text"]


def test_cli_checkpoint_from_a_file(tmp_path):
    source = tmp_path / "paste.txt"
    source.write_text(big_text(0.3), encoding="utf-8")
    db = tmp_path / "a.db"
    env = hermetic_env(tmp_path, db)
    out = run_cwa(["checkpoint", "--file", str(source), "--session", "s1", "--project", P], env)
    assert out.returncode == 0 and b"archived: doc-" in out.stdout and SENTINEL.encode() not in out.stdout
    again = run_cwa(["checkpoint", "--file", str(source), "--session", "s1", "--project", P], env)
    assert b"already archived" in again.stdout
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe not utf-8")
    bad = run_cwa(["checkpoint", "--file", str(tmp_path / "bad.txt"), "--session", "s1"], env)
    assert bad.returncode == EXIT_CODES["invalid-request"] and b"Traceback" not in bad.stderr


def test_cli_get_text_of_a_root_prints_the_original(tmp_path):
    text = big_text(1.5)
    db = tmp_path / "a.db"
    with Archive.open(db) as archive:
        root = archive.call("checkpoint", {"project": P, "sessionId": "s1", "text": text})["rootId"]
    out = run_cwa(["get", root, "--text"], hermetic_env(tmp_path, db))
    assert out.returncode == 0 and out.stdout == text.encode("utf-8")


def test_parts_end_at_a_line_so_a_phrase_at_the_boundary_is_found(archive):
    from cwa.session.checkpoint import PART_BYTES, split_parts

    line = "compiling module ok\n"
    head = line * ((PART_BYTES - 10) // len(line))
    text = head + "x" * (PART_BYTES - 10 - len(head)) + " FAULT-SENTINEL-BOUNDARY-PHRASE here\n" + line * 1000
    parts = split_parts(text)
    assert "".join(parts) == text and all(len(p.encode()) <= PART_BYTES for p in parts)
    assert all(p.endswith((" ", "\n")) for p in parts[:-1])  # never inside a word
    assert any("FAULT-SENTINEL-BOUNDARY-PHRASE" in p for p in parts)
    done = archive.call("checkpoint", {"project": "/work/p", "sessionId": "s", "text": text})
    assert archive.get({"documentId": done["rootId"]})["text"] == text
    found = archive.call(
        "search", {"project": "/work/p", "query": '"FAULT-SENTINEL-BOUNDARY-PHRASE"', "semanticPolicy": "never"}
    )["results"]
    assert found and found[0]["matchType"] == "exact-quoted"
    # one endless line has no place to cut: the limit still holds
    assert all(len(p.encode()) <= PART_BYTES for p in split_parts("é" * (PART_BYTES // 2 + 7)))
