"""A command answered by the cluster's own ddpctl over the transport, its answer made safe to show here.

The client never reads the remote run dir: it runs the remote `ddpctl status ...` and shows what that printed,
as text with control characters made visible (ddpctl.sanitize), or as JSON parsed and written out again (JSON
escapes control characters itself). The remote one-line error keeps its exit status (2: no such job).
"""

from __future__ import annotations

import json
import re
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
# A command the cluster's ddpctl names in a hint (`logs: ddpctl logs local-1 ...`): a command for there.
_HINT_RE = re.compile(r"\bddpctl (sweep results|logs|status|cancel|top|preempt|scale)(?= )")


def option(flag: str, value: object) -> str:
    """`--flag=value`, one word for the cluster's ddpctl: as two words a value that starts with `-` (`--grep -f`)
    would be read there as an option of its own."""
    return f"{flag}={value}"


def for_here(line: str, cluster: str) -> str:
    """A line the cluster's ddpctl printed, as it reads here: each command it names gets `--cluster NAME` (typed
    here without it, `ddpctl logs local-1` would open a different job, the laptop's own local-1), and "on this
    machine" is the cluster's login node. Pure; the line is already made visible."""
    line = _HINT_RE.sub(lambda found: f"ddpctl {found.group(1)} --cluster {cluster}", line)
    return line.replace(" on this machine", f" on cluster {cluster!r} (its login node)")


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
        return Answer("\n".join(for_here(line, cluster.name) for line in visible_lines(done.stdout.splitlines())))
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


MAX_REPORT = 64 << 20  # a report of a sweep of long runs is a few MiB; far more is not a report
_ACTIVE_RE = re.compile(r"<\s*(script|iframe|object|embed|link|base|form)\b|javascript:|<[^>]*\son[a-z]+\s*=", re.I)
_CSP = '<meta http-equiv="Content-Security-Policy" content="default-src \'none\';'


def report_problem(html: str) -> str | None:
    """Why a report the cluster's ddpctl printed is not one to write here and open in a browser (None: it is).
    The page is ddpctl's own (escaped text, inline SVG, no script), but it comes over the wire from another
    machine: anything active in it, or a page without the report's own lock-down, is refused, not opened."""
    if not html.startswith("<!DOCTYPE html>"):
        return "it printed no HTML page"
    if _CSP not in html[:4096]:
        return "its page lacks the report's Content-Security-Policy"
    if (found := _ACTIVE_RE.search(html)) is not None:
        return f"its page holds active content ({visible(found.group(0)[:40])!r})"
    return None


def fetch_report(
    name: str, job: str, local: str, *, runner: Runner | None = None, env: Mapping[str, str] | None = None
) -> str:
    """The HTML report of `job` written by cluster `name`'s ddpctl (`report JOB --output=-`), checked."""
    path = clusters_path(env)
    cluster = find(read_clusters(path), name, path)
    transport = Transport(cluster, runner=runner, env=env, timeout=300.0, limit=MAX_REPORT + 1)
    done = transport.run([*cluster.ddpctl, "report", option("--output", "-"), "--", job])
    if done.returncode != 0:
        answer(cluster, done, local, as_json=False)  # its one-line error, with the remote's exit status
    if len(done.stdout) > MAX_REPORT:
        raise RemoteError(f"cluster {cluster.name!r}: the remote ddpctl printed more than {MAX_REPORT} bytes")
    if (problem := report_problem(done.stdout)) is not None:
        raise RemoteError(f"cluster {cluster.name!r}: report of {visible(job)!r} refused: {problem}")
    return done.stdout
