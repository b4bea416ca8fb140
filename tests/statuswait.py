"""`python statuswait.py JOB TIMEOUT STATE...`: `ddpctl status JOB --json` once a second in one interpreter, until
the state is one of STATE...; prints that last status (exit 0), or the last one seen at TIMEOUT (exit 1). A failing
`status` ends it (exit 1, its output on stderr).

`Cli.wait_terminal` runs this instead of one `python -m ddpctl status` per poll: each of those costs ~0.3 s of CPU
to start, which on CI's 2 cores came out of the ranks of the jobs under test (a waiting test took ~23 % of a core).
It calls the CLI's own entry point, so what a test reads is what `ddpctl status --json` prints.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time

from ddpctl.cli import main as ddpctl_main


def status_json(job: str) -> dict[str, object]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = ddpctl_main(["status", job, "--json"])
    if code != 0:  # as `Cli.status` does: a status that fails fails the test at once
        raise SystemExit(f"ddpctl status {job} --json exited {code}:\n{out.getvalue()}")
    result: dict[str, object] = json.loads(out.getvalue())
    return result


def main(argv: list[str]) -> int:
    job, timeout, states = argv[0], float(argv[1]), set(argv[2:])
    deadline = time.monotonic() + timeout
    while True:
        last = status_json(job)
        if last.get("state") in states:
            print(json.dumps(last))
            return 0
        if time.monotonic() >= deadline:
            print(json.dumps(last))
            return 1
        time.sleep(1.0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
