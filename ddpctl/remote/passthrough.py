"""A command answered by the cluster's own ddpctl over the transport, its answer made safe to show here.

The client never reads the remote run dir: it runs the remote `ddpctl status ...` and shows what that printed,
as text with control characters made visible (ddpctl.sanitize), or as JSON parsed and written out again (JSON
escapes control characters itself). The remote one-line error keeps its exit status (2: no such job).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ddpctl.errors import RemoteError
from ddpctl.proc import Completed, Runner
from ddpctl.remote.check import install_hint
from ddpctl.remote.profiles import Cluster, clusters_path, find, read_clusters
from ddpctl.remote.ssh import command_missing
from ddpctl.remote.transport import Transport
from ddpctl.sanitize import visible, visible_lines

MAX_ANSWER = 1 << 20  # a status is a few KiB; more is not an answer to show


@dataclass(frozen=True)
class Answer:
    out: str
    code: int = 0


def answer(cluster: Cluster, done: Completed, local: str, *, as_json: bool) -> Answer:
    """What to print for the remote command's result, or a one-line RemoteError (with the remote's exit status)."""
    where = f"cluster {cluster.name!r}"
    if command_missing(done.returncode, done.stderr):
        command = visible(" ".join(cluster.ddpctl))
        raise RemoteError(f"{where}: no {command!r} on {visible(cluster.ssh)}: {install_hint(local)}")
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        last = visible(said[-1]).removeprefix("ddpctl: error: ") if said else f"exit status {done.returncode}"
        err = RemoteError(f"{where}: {last}")
        err.exit_code = done.returncode  # the remote's own: 2 for a job it does not know
        raise err
    if len(done.stdout) > MAX_ANSWER:
        raise RemoteError(f"{where}: the remote ddpctl printed more than {MAX_ANSWER} bytes")
    if not as_json:
        return Answer("\n".join(visible_lines(done.stdout.splitlines())))
    try:
        data = json.loads(done.stdout)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise RemoteError(f"{where}: the remote ddpctl printed no JSON object: {visible(done.stdout[:80])!r}")
    return Answer(json.dumps(data))


def run_remote(
    name: str,
    words: Sequence[str],
    local: str,
    *,
    as_json: bool,
    runner: Runner | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
) -> Answer:
    """`<cluster's ddpctl> WORDS` on the cluster called `name`, answered as `answer` says."""
    path = clusters_path(env)
    cluster = find(read_clusters(path), name, path)
    done = Transport(cluster, runner=runner, env=env, timeout=timeout, limit=MAX_ANSWER + 1).run(
        [*cluster.ddpctl, *words]
    )
    return answer(cluster, done, local, as_json=as_json)
