"""Code snapshot at submit: every attempt of a run (requeued or chained) runs the code as it was at submit.

`take` (at submit, inside the staging run dir) lists the code's files — in a git work tree the tracked files plus
uncommitted changes and untracked, not-ignored files of the repository holding the script (`collect.git_manifest`);
otherwise the script's directory (`collect.dir_manifest`) — and stores them content-addressed under
`<run_dir>/.snapshots/` (`store`): once per content, so an unchanged second submit copies nothing. The run dir's
`snapshot.json` records the commit, branch, dirty state and the script's path inside the snapshot; `pin` (on the
node) points the spec's script there.
"""

from ddpctl.snapshot.info import MODES, SnapshotInfo, pin, read_info, summary, take

__all__ = ["MODES", "SnapshotInfo", "pin", "read_info", "summary", "take"]
