"""cwa's own Python children (a bulk index's helper, serve's index worker) run this cwa as a
module: never a `cwa` package the working directory holds, and never the parent's `__main__`
again (cwa/child_process.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from cwa.child_process import CWA_FOLDER

# A user's script calling the Python API without an `if __name__ == "__main__":` guard. Each run
# of its top level adds a line to runs.txt; it reports whether the rebuild's helper process was
# started and answered.
SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    here = Path(sys.argv[1])
    with open(here / "runs.txt", "a") as runs:
        runs.write("ran\\n")

    from cwa.api import Archive
    from cwa.index import prepare_helper, queue_worker

    queue_worker.HELPER_MIN_DOCUMENTS = 1
    answered = []
    receive = prepare_helper.Helper.receive

    def counted(self):
        found = receive(self)
        answered.append(len(found))
        return found

    prepare_helper.Helper.receive = counted
    with Archive.open(here / "archive.db") as archive:
        for n in range(20):
            text = f"note {n} about src/module_{n}.py"
            archive.admit({"project": "/p", "sessionId": "s", "kind": "turn", "messages": [{"role": "user", "text": text}]})
        rebuilt = archive.call("index-rebuild", {})["documents"]
        found = archive.search({"project": "/p", "query": "src/module_7.py", "leaseSeconds": 0})["results"]
    print(rebuilt, sum(answered), found[0]["matchType"])
    """
)


def test_a_script_without_a_main_guard_runs_once_and_a_cwa_in_the_working_folder_is_not_imported(tmp_path):
    scripts, work = tmp_path / "scripts", tmp_path / "work"
    (work / "cwa").mkdir(parents=True)
    scripts.mkdir()
    # a project whose own top-level package is named cwa: a child started with `python -m` from
    # here would import it instead of this cwa
    (work / "cwa" / "__init__.py").write_text(
        f"open({str(tmp_path / 'shadowed.txt')!r}, 'a').write('imported\\n')\nraise ImportError('not cwa')\n"
    )
    (scripts / "unguarded.py").write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(scripts / "unguarded.py"), str(tmp_path)],
        cwd=work,
        capture_output=True,
        env={"PYTHONPATH": CWA_FOLDER, "HOME": str(tmp_path), "CWA_DISK_CRITICAL_MEBIBYTES": "0"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    rebuilt, helped, match = done.stdout.decode().split()
    assert (rebuilt, helped, match) == ("20", "20", "exact-path")  # every document prepared by the helper
    assert (tmp_path / "runs.txt").read_text() == "ran\n"  # the script's top level ran once
    assert not (tmp_path / "shadowed.txt").exists()


def test_a_client_starts_this_cwa_from_a_project_whose_own_package_is_named_cwa(tmp_path):
    from cwa.integrations.launch import cwa_command

    work = tmp_path / "project"
    (work / "cwa").mkdir(parents=True)
    (work / "cwa" / "__init__.py").write_text(
        f"open({str(tmp_path / 'shadowed.txt')!r}, 'a').write('imported\\n')\nraise ImportError('not cwa')\n"
    )
    env = {"HOME": str(tmp_path), "CWA_DISK_CRITICAL_MEBIBYTES": "0"}
    command = cwa_command(tmp_path / "archive.db", env, "status", "--json")  # as an MCP client's config has it
    done = subprocess.run(command, cwd=work, capture_output=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    assert '"documents"' in done.stdout.decode()
    assert not (tmp_path / "shadowed.txt").exists()
