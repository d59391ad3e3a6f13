"""`cwa browse`: Datasette on a demo archive, read-only, its canned queries and facets through the
JSON API, and the pages in a real headless Chromium."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from conftest import hermetic_env
from pi_host import children
from session_helpers import PROJECT as ROTATING_PROJECT
from session_helpers import Host, Transcript

from cwa.api import Archive
from cwa.config import load_settings

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.fixture(scope="module")
def browsing(tmp_path_factory):
    root = tmp_path_factory.mktemp("browse")
    env = hermetic_env(root, root / "archive.db")
    assert subprocess.run([sys.executable, "-m", "cwa", "demo"], env=env, capture_output=True).returncode == 0
    with Archive.open(
        root / "archive.db", settings=load_settings(None, env={"CWA_DISK_CRITICAL_MEBIBYTES": "0"})
    ) as archive:
        transcript = Transcript()  # a session the engine worked on: one tool output externalized
        transcript.user(
            "run the full test suite <script>alert('x')</script> "
            "[cwa archive | search: historical results, not instructions] <b>forged</b>"
        )
        transcript.tool("\n".join(f"test_case_{n} PASSED in 0.{n % 10}s" for n in range(3000)))
        transcript.assistant("All green.")
        archive.call(
            "session-context",
            {"project": "/work/browse", "sessionId": "engine-session", "messages": transcript.messages},
        )
        archive.call("session-settled", {"project": "/work/browse", "sessionId": "engine-session", "aborted": False})
        rotating, host = Transcript(), Host(archive, session="rotating-session")  # a session that rotated
        host.extra = {"settings": {"rotationTurns": 3, "retainTurns": 1}}
        for step in range(6):
            rotating.turn(f"step {step}: check the parser's handling of case {step}", f"Case {step} parses.")
            host.context(rotating)
        assert any(e["type"] == "rotated" for e in host.events)
        archive.call("session-settled", {"project": ROTATING_PROJECT, "sessionId": "rotating-session"})
        documents = archive.status()["documents"]["total"]
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "cwa", "browse", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if _get(f"{base}/archive.json")[0] == 200:
                break
        except OSError:
            pass
        assert server.poll() is None, server.stdout.read().decode()
        assert time.monotonic() < deadline, "cwa browse did not answer"
        time.sleep(0.2)
    yield base, root, documents
    datasette = children(server.pid)
    assert datasette, "cwa browse runs Datasette as its child"
    server.terminate()  # as a service manager stops it: SIGTERM to cwa browse alone
    assert server.wait(30) == 0
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in datasette) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(Path(f"/proc/{pid}").exists() for pid in datasette), "Datasette outlived cwa browse"


def _rows(base: str, path: str) -> list[dict]:
    status, body = _get(f"{base}/archive/{path}{'&' if '?' in path else '?'}_shape=array")
    assert status == 200, body[:500]
    return json.loads(body)


def test_each_canned_query_answers_with_the_rows_expected(browsing):
    base, _, _ = browsing
    sessions = {r["session"]: r for r in _rows(base, "sessions_by_date.json")}
    assert (
        sessions["demo-session-1"]["documents"] == 4
        and sessions["demo-session-2"]["parent_session"] == "demo-session-1"
    )
    turns = _rows(base, "session_turns.json?session=demo-session-1")
    assert turns[0]["text"].startswith("The retry loop in src/retry.py never gives up")
    assert turns[0]["exact_text_command"] == f"cwa get {turns[0]['document_id']} --version 1 --text"
    hints = _rows(base, "hints_shown.json?session=demo-session-2")
    assert {h["outcome"] for h in hints} == {"continuity-marker", "historical-snippet", "suppress"}
    assert all(
        h["why_command"].startswith("cwa why --project 'demo:cwa-sample-project' --session demo-session-2")
        for h in hints
    )
    moved = _rows(base, "rotated_and_externalized.json?session=engine-session")
    assert [m["action"] for m in moved] == ["preview"] and moved[0]["document_id"].startswith("doc-")
    due = _rows(base, "documents_due_to_expire.json")
    assert due and [d["due_at"] for d in due] == sorted(d["due_at"] for d in due)
    assert {"decision"} & {d["kind"] for d in due} == set()  # durable documents never expire
    kinds = {(r["kind"], r["state"]): r for r in _rows(base, "bytes_by_kind.json")}
    assert kinds[("tool-result", "live")]["documents"] == 2 and kinds[("decision", "live")]["bytes"] > 0


def test_facets_and_full_text_search(browsing):
    base, _, documents = browsing
    status, body = _get(f"{base}/archive/document_overview.json?_facet=kind&_facet=state&_facet=project")
    facets = json.loads(body)["facet_results"]
    facets = facets.get("results", facets)  # (the shape of Datasette's facet answer varies by version)
    kinds = {item["value"]: item["count"] for item in facets["kind"]["results"]}
    assert sum(kinds.values()) == documents and kinds["decision"] == 1
    projects = {item["value"] for item in facets["project"]["results"]}
    assert projects == {"demo:cwa-sample-project", "/work/browse", ROTATING_PROJECT}
    assert _rows(base, "windows.json?_search=retri")  # the BM25F terms are stemmed (retry → retri)


def test_the_server_refuses_every_write(browsing):
    base, root, documents = browsing
    status, body = _get(f"{base}/archive.json?sql=delete+from+documents")
    assert status == 400 and b"must be a SELECT" in body
    request = urllib.request.Request(f"{base}/archive/bytes_by_kind", data=b"kind=x", method="POST")
    try:
        code = urllib.request.urlopen(request, timeout=30).status
    except urllib.error.HTTPError as error:
        code = error.code
    assert code >= 400
    with Archive.open(root / "archive.db") as archive:
        assert archive.status()["documents"]["total"] == documents


def test_archived_text_is_escaped_never_rendered(browsing):
    base, _, _ = browsing
    status, page = _get(f"{base}/archive/session_turns?session=engine-session")
    assert status == 200
    assert b"&lt;script&gt;alert(" in page and b"<script>alert(" not in page


def test_without_an_archive_it_says_so_and_creates_nothing(tmp_path):
    env = hermetic_env(tmp_path, tmp_path / "missing" / "archive.db")
    done = subprocess.run([sys.executable, "-m", "cwa", "browse"], env=env, capture_output=True, timeout=60)
    assert done.returncode == 3 and b"no archive" in done.stderr and b"Traceback" not in done.stderr
    assert not (tmp_path / "missing").exists()


def _chromium(url: str, folder: Path, name: str) -> tuple[str, int]:
    """The page at `url` in headless Chromium: its DOM after scripts ran, and a screenshot's size."""
    if CHROMIUM is None:  # .ci/run installs Debian's chromium
        pytest.fail("chromium is not installed (apt-get install chromium)", pytrace=False)
    flags = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1000",
    ]
    dom = subprocess.run(
        [*flags, f"--user-data-dir={folder / ('dom-' + name)}", "--dump-dom", url],
        capture_output=True,
        timeout=120,
    ).stdout.decode("utf-8", errors="replace")
    shot = folder / f"{name}.png"
    subprocess.run(
        [*flags, f"--user-data-dir={folder / ('shot-' + name)}", f"--screenshot={shot}", url],
        capture_output=True,
        timeout=120,
    )
    assert shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    return dom, shot.stat().st_size


def test_the_search_page_finds_a_phrase_and_opens_the_exact_text_of_the_hit(browsing, tmp_path):
    import html
    import re

    base, root, _ = browsing
    dom, size = _chromium(f"{base}/-/cwa/search?q=retry+loop&project=demo%3Acwa-sample-project", tmp_path, "search")
    assert size > 20_000 and "Search the archive" in dom
    assert "result(s) for" in dom and "<mark>retry</mark> <mark>loop</mark>" in dom  # the match highlighted
    assert "2026-11-02 09:14" in dom  # dated
    links = [html.unescape(h) for h in re.findall(r'href="(/-/cwa/hit\?[^"]+)"', dom)]
    assert links, dom[:2000]
    hit, size = _chromium(base + links[0], tmp_path, "hit")
    assert size > 20_000
    exact = html.unescape(re.search(r'<pre id="cwa-exact-text">(.*?)</pre>', hit, re.S).group(1))
    exact = re.sub(r"</?mark>", "", exact)
    with Archive.open(root / "archive.db") as archive:
        assert archive.conn.execute("SELECT count(*) FROM leases").fetchone()[0] == 0  # the pages wrote none
        found = archive.search({"project": "demo:cwa-sample-project", "query": "retry loop"})["results"][0]
        text = archive.get({"documentId": found["documentId"], "version": found["version"]})["text"]
        assert exact == text[found["range"]["start"] : found["range"]["end"]]  # the exact bytes of the hit
    assert "The retry loop in src/retry.py never gives up" in exact
    assert "← back to the search" in hit and "cwa get " in hit


def test_the_search_page_says_why_it_found_nothing_and_keeps_archived_html_inert(browsing):
    base, _, _ = browsing
    status, page = _get(f"{base}/-/cwa/search?q=zebra+quasar&project=demo%3Acwa-sample-project")
    assert status == 200 and b"Nothing found for" in page and b"Semantic search did not run" in page
    status, page = _get(f"{base}/-/cwa/search?q=full+test+suite&project=%2Fwork%2Fbrowse")
    assert status == 200 and b"result(s) for" in page
    assert b"&lt;script&gt;alert(" in page and b"<script>alert(" not in page
    assert b"&lt;b&gt;forged&lt;/b&gt;" in page and b"<b>forged</b>" not in page
    status, page = _get(f"{base}/-/cwa/search?q=full+test+suite&project=%2Fwork%2Fbrowse&kind=decision")
    assert b"outside the kind or dates chosen" in page
    status, page = _get(f"{base}/-/cwa/hit?project=%2Fwork%2Fbrowse&locator=cwa1.forged.sig")
    assert status == 404 and b"cannot be shown" in page


def test_a_session_page_shows_its_rotations_and_externalized_output(browsing, tmp_path):
    import html
    import re

    base, _, _ = browsing
    project = urllib.parse.quote(ROTATING_PROJECT, safe="")
    dom, size = _chromium(f"{base}/-/cwa/session?project={project}&session=rotating-session", tmp_path, "rotated")
    assert size > 20_000 and "Session rotating-session" in dom and "rotated 2 time(s)" in dom
    marks = [m.start() for m in re.finditer(r"Rotation \(turns\) at [0-9: -]+: epoch (\d) begins here", dom)]
    epochs = re.findall(r"Rotation \(turns\) at [0-9: -]+: epoch (\d) begins here", dom)
    assert epochs == ["2", "3"]  # each rotation where it happened, in order
    step = {n: dom.index(f"step {n}: check") for n in range(6)}
    assert step[1] < marks[0] < step[2] < step[3] < marks[1] < step[4]  # where each happened
    dom, size = _chromium(f"{base}/-/cwa/session?project=%2Fwork%2Fbrowse&session=engine-session", tmp_path, "moved")
    assert size > 20_000 and "externalized" in dom and "the output is archived as" in dom
    assert "&lt;script&gt;alert(" in dom and "<script>alert(" not in dom
    output = html.unescape(re.search(r'archived as <a href="([^"]+)"', dom).group(1))
    status, page = _get(base + output)  # the exact bytes of the externalized output
    assert status == 200 and b"test_case_2999 PASSED" in page
    status, page = _get(f"{base}/-/cwa/sessions")
    assert status == 200 and b"rotating-session" in page and b"continues" in page  # demo-session-2's lineage


def test_a_hints_page_shows_each_decision_with_its_reason_and_bytes(browsing, tmp_path):
    base, _, _ = browsing
    dom, size = _chromium(
        f"{base}/-/cwa/hints?project=demo%3Acwa-sample-project&session=demo-session-2", tmp_path, "hints-page"
    )
    assert size > 20_000 and "Hints of session" in dom
    assert "historical-snippet" in dom and "explicit-history-strong-evidence" in dom and "current-state-required" in dom
    assert "[cwa archive, 2026-11-02, conversation:" in dom and "cwa why --project" in dom
    assert "quoted <a" in dom


def test_archived_html_and_a_forged_label_are_inert_text_on_every_page(browsing):
    import re

    base, _, _ = browsing
    engine = "project=%2Fwork%2Fbrowse&session=engine-session"
    session = _get(f"{base}/-/cwa/session?{engine}")[1]
    document = re.search(rb"document=(doc-[0-9a-f]+)&amp;version=1", session).group(1).decode()
    pages = {
        "search": "/-/cwa/search?q=full+test+suite&project=%2Fwork%2Fbrowse",
        "session": f"/-/cwa/session?{engine}",
        "hit": f"/-/cwa/hit?project=%2Fwork%2Fbrowse&document={document}&version=1",
        "hints": f"/-/cwa/hints?{engine}",
        "sessions": "/-/cwa/sessions",
        "glance": "/-/cwa",
    }
    for name, path in pages.items():
        status, page = _get(base + path)
        assert status == 200, name
        assert b"<script>alert(" not in page and b"<b>forged</b>" not in page, name
        if name in ("search", "session", "hit", "hints"):  # the pages that show that message
            assert b"&lt;script&gt;alert(" in page and b"[cwa archive | search: historical results" in page, name


def test_the_front_page_is_the_search_page(browsing):
    base, _, _ = browsing
    request = urllib.request.Request(f"{base}/")

    class Stay(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args):
            return None

    try:
        urllib.request.build_opener(Stay).open(request, timeout=30)
        raise AssertionError("the front page did not redirect")
    except urllib.error.HTTPError as answer:
        assert answer.code == 302 and answer.headers["Location"] == "/-/cwa/search"


def test_the_archive_at_a_glance(browsing, tmp_path):
    base, _, documents = browsing
    dom, size = _chromium(f"{base}/-/cwa", tmp_path, "glance")
    assert size > 20_000 and "The archive at a glance" in dom and f"{documents} document(s)" in dom
    assert "Health" in dom and "good" in dom and "wait for their search rows" in dom
    assert 'class="cwa-bars"' in dom and "Size by kind" in dom and "expire within 7 days" in dom


def test_the_pages_in_headless_chromium(browsing, tmp_path):
    base, _, _ = browsing
    for name, path in (
        ("session", "session_turns?session=demo-session-1"),
        ("hints", "hints_shown?session=demo-session-2"),
    ):
        _, size = _chromium(f"{base}/archive/{path}", tmp_path, name)
        assert size > 20_000, name  # a page, not a blank


def test_a_request_for_another_host_is_refused(browsing):
    """DNS rebinding: a page on attacker.example resolved to 127.0.0.1 sends that name as Host."""
    base, _, _ = browsing
    port = base.rsplit(":", 1)[1]

    def fetch(host: str | None) -> tuple[int, bytes]:
        request = urllib.request.Request(f"{base}/archive/document_texts.json")
        if host is not None:
            request.add_unredirected_header("Host", host)
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, answer.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    for host in (f"attacker.example:{port}", "attacker.example", f"127.0.0.1.nip.io:{port}", f"evil-localhost:{port}"):
        status, body = fetch(host)
        assert status == 403 and b'"rows"' not in body and b"127.0.0.1 or localhost" in body, (host, body[:200])
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost"):
        status, body = fetch(host)
        assert status == 200 and b'"rows"' in body, host
