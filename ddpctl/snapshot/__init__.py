"""Code snapshot at submit: every attempt of a run (requeued or chained) runs the code as it was at submit.

`take` (at submit, inside the staging run dir) lists the code's files — in a git work tree the tracked files plus
uncommitted changes and untracked, not-ignored files of the repository holding the script; otherwise the
script's directory (`walk`) — checks sizes and counts before reading anything, stores the contents in the
submitting user's private store under `<run_dir>/.snapshots/` (`store`: hashed as copied, once per content, so
an unchanged second submit copies nothing into it) and writes the run's own copy to its run dir's `code/`
(`copy`: reflinks where the filesystem has them). The run dir's `snapshot.json` records the commit, branch,
dirty state, what was left out and the script's path in the copy; `pin` (on the node) points the spec's script
there. `check` makes every check without copying (`submit --dry-run`).
"""

from ddpctl.snapshot.info import (
    MODES,
    Preview,
    SnapshotInfo,
    check,
    left_out_lines,
    pin,
    read_info,
    summary,
    take,
    take_each,
)

__all__ = [
    "MODES",
    "Preview",
    "SnapshotInfo",
    "check",
    "left_out_lines",
    "pin",
    "read_info",
    "summary",
    "take",
    "take_each",
]
