"""How cwa starts a Python child of its own (serve's index worker, a bulk index's helper): this
interpreter running `-P -m MODULE`, with this cwa's folder first on PYTHONPATH.

`-m` alone would put the working directory first on the child's path, so a `cwa` package there
(a checkout of another version, a project's own module) would be imported instead of this one;
`-P` leaves it out. This cwa's folder goes first because the parent may have found cwa through a
path it set itself (a script's `sys.path.insert`); not when it is a site-packages folder, which
the child finds anyway and which must not come before the standard library. And a child started
this way runs only its module: multiprocessing's `spawn` would import the parent's `__main__`
again in the child, running a user's unguarded script a second time.
"""

from __future__ import annotations

import os
import site
import sys
from pathlib import Path

import cwa

CWA_FOLDER = str(Path(cwa.__file__).resolve().parent.parent)  # the folder `import cwa` found cwa in


def module_command(module: str, *args: str) -> list[str]:
    """This interpreter running `module` with `-P` (the command alone: what a client's
    configuration holds, cwa/integrations/launch.py)."""
    return [sys.executable, "-P", "-m", module, *args]


def python_module(module: str, *args: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run `python -m module args` with this process's cwa."""
    env = dict(os.environ)
    if not _installed():
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = CWA_FOLDER + (os.pathsep + path if path else "")
    return module_command(module, *args), env


def _installed() -> bool:
    """Whether cwa was found in a site-packages folder of this interpreter (an installed wheel)."""
    folders = [*getattr(site, "getsitepackages", list)(), site.getusersitepackages()]  # absent in some embeddings
    return CWA_FOLDER in {str(Path(folder).resolve()) for folder in folders}
