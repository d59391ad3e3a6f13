"""Admission and direct reads keep every byte: multibyte text, large documents, reopened files."""

from __future__ import annotations

import shutil
import subprocess
import zlib

import apsw
import blake3
import pytest

from cwa.api import Archive
from cwa.errors import InvalidRequest
from cwa.limits import CHUNK_NEWLINE_AFTER, MAX_CHUNK_BYTES
from cwa.store import payloads


def _multibyte_session() -> list[dict]:
    line = "日本語のテキスト 🚀 emoji ünïcödé — Ωμέγα — src/retry.py:42 RetryPolicy 漢字\n"
    tool_output = line * 3000  # ~300 KiB of mostly 3- and 4-byte characters
    return [
        {"key": "u1", "role": "user", "text": "なぜ失敗する? 😱 why does it fail?"},
        {"key": "a1", "role": "assistant", "text": "Let me look. 見てみます。"},
        {
            "key": "t1",
            "role": "toolResult",
            "toolName": "bash",
            "toolCallId": "call-1",
            "text": tool_output,
        },
        # no newline at all: chunk boundaries must still land between characters
        {"key": "t2", "role": "toolResult", "toolName": "cat", "text": "鍵" * 40_000},
    ]


def test_large_multibyte_document_round_trips_byte_for_byte_after_reopen(db_path):
    messages = _multibyte_session()
    with Archive.open(db_path) as archive:
        admitted = archive.admit({"project": "/p", "sessionId": "s", "kind": "turn", "messages": messages})
    with Archive.open(db_path) as archive:  # a fresh connection to the file on disk
        doc = archive.get({"documentId": admitted["documentId"]})

    data = doc["text"].encode("utf-8")
    assert len(data) > 200 * 1024
    assert doc["complete"] is True
    assert doc["byteLength"] == len(data)
    assert blake3.blake3(data).hexdigest() == doc["textDigest"]
    for message, coords in zip(messages, doc["messages"]):
        assert coords["key"] == message["key"]
        assert data[coords["textStart"] : coords["end"]].decode("utf-8") == message["text"]
        assert data[coords["start"] : coords["textStart"]].startswith(b"[" + message["role"].encode())

    chunks = doc["manifest"]["chunks"]
    assert len(chunks) > 3
    assert chunks[0]["start"] == 0 and chunks[-1]["end"] == len(data)
    for before, after in zip(chunks, chunks[1:]):
        assert before["end"] == after["start"]
    for chunk in chunks:
        piece = data[chunk["start"] : chunk["end"]]
        piece.decode("utf-8")  # raises if a boundary splits a character
        assert len(piece) <= MAX_CHUNK_BYTES
        assert blake3.blake3(piece).hexdigest() == chunk["hash"]
        if chunk is not chunks[-1] and b"\n" in piece[CHUNK_NEWLINE_AFTER - 1 :]:
            assert piece.endswith(b"\n")  # newline preferred once 16 KiB is in the chunk


def test_stored_chunks_are_valid_utf8_deflated_and_reassemble_in_sql(db_path):
    """Each chunk holds whole UTF-8 characters; its payload is those bytes deflated where that is
    shorter (migration 0038), and `document_texts` reassembles the text through sqlar_uncompress,
    which cwa registers on a connection of its own (payloads.register)."""
    with Archive.open(db_path) as archive:
        admitted = archive.admit({"project": "/p", "sessionId": "s", "kind": "turn", "messages": _multibyte_session()})
        expected = archive.get({"documentId": admitted["documentId"]})["text"]
    conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
    chunks = conn.execute("SELECT hash, byte_length, data FROM chunks").fetchall()
    assert len(chunks) > 1 and all(len(payload) < byte_length for _, byte_length, payload in chunks)
    for digest, byte_length, payload in chunks:
        data = zlib.decompress(payload)
        assert len(data) == byte_length and blake3.blake3(data).digest() == digest
        data.decode("utf-8")
    payloads.register(conn)
    (text,) = conn.execute(
        "SELECT text FROM document_texts WHERE document_id = ?", (admitted["documentId"],)
    ).fetchone()
    assert text == expected


@pytest.mark.skipif(
    shutil.which("sqlite3") is None, reason="the sqlite3 shell is not installed (.ci/install-tools installs it)"
)
def test_the_sqlite3_shell_reads_document_texts_and_a_chunk_stored_whole(db_path):
    """The sqlite3 shell's own sqlar_uncompress reads a deflated payload and one stored as its
    bytes (too short to deflate) alike: the archive's text needs nothing of cwa's to be read."""
    with Archive.open(db_path) as archive:
        long = archive.admit({"project": "/p", "sessionId": "s", "kind": "turn", "messages": _multibyte_session()})
        short = archive.admit(
            {"project": "/p", "sessionId": "s", "kind": "turn", "messages": [{"role": "user", "text": "ok"}]}
        )
        expected = {d["documentId"]: archive.get({"documentId": d["documentId"]})["text"] for d in (long, short)}
        assert archive.conn.execute("SELECT count(*) FROM chunks WHERE length(data) = byte_length").fetchone()[0] == 1
    for document_id, text in expected.items():
        shown = subprocess.run(
            [
                "sqlite3",
                "-readonly",
                str(db_path),
                f"SELECT text FROM document_texts WHERE document_id = '{document_id}'",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout == text + "\n"


def test_identical_bytes_are_stored_once_across_documents(archive):
    shared = "x" * 20_000 + "\n" + "shared line of a big tool output\n" * 2000
    first = archive.admit(
        {
            "project": "/p",
            "sessionId": "s",
            "kind": "tool-result",
            "messages": [{"key": "k1", "role": "toolResult", "text": shared}],
        }
    )
    second = archive.admit(
        {
            "project": "/p",
            "sessionId": "s",
            "kind": "tool-result",
            "messages": [{"key": "k2", "role": "toolResult", "text": shared}],
        }
    )
    assert first["documentId"] != second["documentId"]
    hashes_1 = {c["hash"] for c in archive.get({"documentId": first["documentId"]})["manifest"]["chunks"]}
    hashes_2 = {c["hash"] for c in archive.get({"documentId": second["documentId"]})["manifest"]["chunks"]}
    shared_hashes = hashes_1 & hashes_2
    assert len(shared_hashes) >= 2  # only the first chunk (holding the header) differs
    (stored,) = archive.conn.execute("SELECT count(*) FROM chunks").fetchone()
    assert stored == len(hashes_1 | hashes_2)


def test_a_chunk_whose_digest_shares_its_first_8_bytes_with_another_is_stored_and_read_as_itself(tmp_path):
    """Chunks are found by the digest's first 8 bytes (migration 0032) and the whole digest is
    compared: a stored chunk made to share a new chunk's prefix neither stands in for it nor hides it."""
    later = {"project": "/p", "sessionId": "s", "kind": "turn", "messages": [{"key": "b", "role": "user", "text": "B"}]}
    with Archive.open(tmp_path / "scratch.db") as scratch:  # the later chunk's digest, learned beforehand
        admitted = scratch.get({"documentId": scratch.admit(later)["documentId"]})
        (later_hash,) = [bytes.fromhex(c["hash"]) for c in admitted["manifest"]["chunks"]]
    with Archive.open(tmp_path / "a.db") as archive:
        earlier = archive.admit({**later, "messages": [{"key": "a", "role": "user", "text": "A"}]})
        ((row, stored),) = archive.conn.execute("SELECT id, hash FROM chunks").fetchall()
        archive.conn.execute("UPDATE chunks SET hash = ? WHERE id = ?", (later_hash[:8] + stored[8:], row))
        second = archive.admit(later)
        assert archive.get({"documentId": second["documentId"]})["text"].endswith("B")
        assert archive.get({"documentId": earlier["documentId"]})["text"].endswith("A")
        assert archive.conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 2


def test_message_keys_are_derived_deterministically_when_missing(archive):
    request = {
        "project": "/p",
        "sessionId": "s",
        "kind": "turn",
        "messages": [
            {"role": "user", "text": "ok", "timestamp": 1764400000000},
            {"role": "user", "text": "ok", "timestamp": 1764400000000},
            {"role": "assistant", "text": "ok", "toolCallId": "c1"},
        ],
    }
    keys = archive.admit(request)["messageKeys"]
    assert len(set(keys)) == 3
    assert keys[1] == keys[0] + "-2"  # the same unkeyed message twice in one document
    other = archive.admit({**request, "sessionId": "s2", "messages": request["messages"][:1]})
    assert other["messageKeys"] == keys[:1]  # same message, same key, in any document


def test_a_document_naming_a_message_key_twice_is_refused_and_nothing_is_stored(archive):
    """A key once per document: the rule admission enforces (no index of keys since migration 0033),
    whether the repeated key is given explicitly or collides with a key derived for another message."""
    unkeyed = {"role": "user", "text": "ok"}
    derived = archive.admit({"project": "/p", "sessionId": "d", "kind": "turn", "messages": [unkeyed]})["messageKeys"]
    before = archive.conn.execute("SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM messages)").fetchone()
    for messages in (
        [{"key": "k", "role": "user", "text": "a"}, {"key": "k", "role": "assistant", "text": "b"}],
        [unkeyed, {"key": derived[0], "role": "assistant", "text": "b"}],
    ):
        request = {"project": "/p", "sessionId": "s", "kind": "turn", "messages": messages}
        if messages[0] is unkeyed:  # the derived key steps aside for the explicit one
            keys = archive.admit(request)["messageKeys"]
            assert keys[1] == derived[0] and keys[0] == derived[0] + "-2"
            continue
        with pytest.raises(InvalidRequest) as refused:
            archive.admit(request)
        assert refused.value.details["reason"] == "duplicate-key"
        assert (
            archive.conn.execute("SELECT (SELECT count(*) FROM documents), (SELECT count(*) FROM messages)").fetchone()
            == before
        )
