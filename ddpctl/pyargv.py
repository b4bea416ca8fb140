"""How ddpctl starts its own Python interpreters (supervisor, launcher, torchrun's agent, the workers' wrapper):
never with the working directory on sys.path.

With `pip install -e .` the clone is a folder named `ddpctl/` beside the user's specs; `python -m ddpctl` run
there imports that folder as a namespace package instead of the installed one (issue 45).
"""

from __future__ import annotations

import sys

# `python -c BOOT MODULE ARGS...` runs MODULE as `-m` would, without the working directory on sys.path (what `-P`
# does from 3.11 on). `-c` puts "" first; only that entry is dropped, so PYTHONPATH (the user's own modules) stays.
# One line without single quotes: it becomes a shell word in the batch script.
_BOOT = (
    'import runpy,sys;sys.path[:1]==[""] and sys.path.pop(0);'
    'runpy.run_module(sys.argv.pop(1),run_name="__main__",alter_sys=True)'
)


def python_module(python: str, module: str) -> list[str]:
    """The argv prefix that runs `python -m module` with the working directory left off sys.path: a folder
    named like a package there (the clone `ddpctl/` beside the user's specs) must not shadow the installed one.
    `-P` where this very interpreter knows it; the `-c` boot for any other one (its version is not known)."""
    if python == sys.executable and sys.version_info >= (3, 11):
        return [python, "-P", "-m", module]
    return [python, "-c", _BOOT, module]
