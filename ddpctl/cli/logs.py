"""`ddpctl logs JOB`: a job's per-rank logs merged with [attempt node rank] prefixes; -f follows requeues."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from ddpctl.cli.common import add_cluster_arg, add_job_arg, found_remote, note, refuse_sweep, remote_ref
from ddpctl.exitcodes import OK

if TYPE_CHECKING:
    from ddpctl.logs.follow import FollowConfig
    from ddpctl.logs.show import LogsRequest

DESCRIPTION = """\
Show a job's worker logs (attempt-<n>/rank-<r>.log under its run dir), each
line prefixed with [a<attempt> <node> r<rank>], all ranks merged in the order
their lines were written (-t shows when). Only whole lines are printed, so
ranks writing at once never mix inside a line.

  -f        follow until the job ends: new lines within 0.5 s, moves on to a
            requeued job's new attempt by itself, ends with
            "-- job ID STATE --". Lines are in write-time order within a 0.5 s
            window: a line may follow a newer line of another rank by at most
            0.5 s, and waits at most 0.5 s for a slower rank (one that comes
            later is shown when read; so is a batch read while a pass over the
            files takes longer than 0.25 s, a follower short of CPU). A
            follower outrun by the writers (256 KiB a pass) and more than
            0.5 s behind them (less, down to 0.2 s, while its passes are slow)
            skips ahead and prints one line saying how many lines and bytes of
            which ranks it skipped; the rank files keep them (read them without
            -f). --no-skip shows every line instead, however late.
  --errors  each rank's first error or traceback, and the rank that most
            likely failed first (non-NCCL errors before NCCL/Gloo collateral,
            then the rank whose log stopped first)
  --json    one object per line: {"attempt", "node", "rank", "text"}
            (banners go to stderr)

Control characters in rank output (terminal escapes, a bare carriage return)
are shown visibly, ESC as ^[ and CR as ^M, as less and git do: a rank cannot
drive your terminal or overwrite another rank's prefix. --raw prints them as
written.
"""


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "logs",
        help="show or follow a job's per-rank logs, merged and prefixed",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    arg = parser.add_argument
    add_job_arg(
        parser,
        "job id, or name (the newest job with that name); default: the most recently submitted job",
        metavar="JOB_ID|NAME",
        nargs="?",
    )
    arg("-f", "--follow", action="store_true", help="keep printing new lines until the job ends")
    arg("--rank", metavar="SPEC", help="only these global ranks: commas and ranges, e.g. 0,3-5")
    arg("--node", metavar="NAME[,NAME]", help="only ranks that ran on these nodes")
    arg("--attempt", metavar="N|all", help="one attempt (0 = first run) or all; default: the latest")
    arg("--grep", metavar="REGEX", help="only lines matching this Python regular expression")
    arg("--tail", metavar="N", help="only the last N lines (of the selection, merged)")
    arg("--errors", action="store_true", help="each rank's first error; name the rank that failed first")
    arg("--no-color", action="store_true", help="no colours (also when not a terminal, or NO_COLOR is set)")
    arg("--json", action="store_true", help="JSON lines: attempt, node, rank, text (and time, with -t)")
    arg("-t", "--timestamps", action="store_true", help="each line's write time (UTC) before its prefix")
    arg(
        "--raw",
        action="store_true",
        help="rank output exactly as written, terminal control sequences included "
        "(default: shown visibly, ESC as ^[ and CR as ^M, so no rank can drive your terminal or forge a prefix)",
    )
    arg(
        "--poll",
        action="store_true",
        help="with -f: poll only, no inotify wake-ups (network filesystems are always polled)",
    )
    arg(
        "--no-skip",
        action="store_true",
        help="with -f: never skip ahead when behind the writers; every line, however late",
    )
    add_cluster_arg(parser, "the job of this remote cluster (clusters.yaml), read by its ddpctl over SSH")
    parser.set_defaults(func=run)


def tail_count(text: str) -> int:
    from ddpctl.errors import LogsError

    if not text.isdigit() or not 0 < int(text) <= 10_000_000:
        raise LogsError(f"--tail {text!r}: expected a number of lines from 1 to 10000000")
    return int(text)


def request_from_args(args: argparse.Namespace) -> LogsRequest:
    # Imported here, not at the top: `ddpctl --help` should not pay for the logs machinery.
    from ddpctl.errors import LogsError
    from ddpctl.logs.core import (
        LineFilter,
        compile_grep,
        parse_attempt,
        parse_nodes,
        parse_rank_spec,
    )
    from ddpctl.logs.show import LogsRequest

    if args.tail is not None and (args.follow or args.errors):
        raise LogsError(f"--tail: cannot be combined with {'-f' if args.follow else '--errors'}")
    if args.tail is not None:
        args.tail = tail_count(args.tail)
    if args.errors and (args.follow or args.grep is not None):
        flag = "-f" if args.follow else "--grep"
        raise LogsError(f"--errors: cannot be combined with {flag}; allowed with it: --rank, --node, --attempt, --json")
    flt = LineFilter(
        ranks=None if args.rank is None else parse_rank_spec(args.rank),
        nodes=None if args.node is None else parse_nodes(args.node),
        grep=None if args.grep is None else compile_grep(args.grep),
    )
    return LogsRequest(follow=args.follow, attempt=parse_attempt(args.attempt), flt=flt, errors=args.errors)


def follow_config(args: argparse.Namespace) -> FollowConfig:
    """-f's settings: the window and the skipping keep a busy job's lines timely (ddpctl.logs.behind);
    --no-skip keeps every line, however late."""
    from ddpctl.logs.behind import SKIP_AFTER_S, WINDOW_S
    from ddpctl.logs.follow import FollowConfig

    skip_after = None if args.no_skip else SKIP_AFTER_S
    return FollowConfig(notify=not args.poll, window=WINDOW_S, skip_after=skip_after)


def run(args: argparse.Namespace) -> int:
    from ddpctl import api
    from ddpctl.logs.output import make_sink
    from ddpctl.logs.show import job_state, show_logs
    from ddpctl.run.registry import JobRecord, Registry
    from ddpctl.run.state import JobState

    request = request_from_args(args)
    if args.cluster or remote_ref(args):
        return remote(args)
    refuse_sweep("logs", args.job)
    job = api.job(args.job, warn=note)
    if found_remote(args, job):
        return remote(args)
    registry = Registry.from_env()
    record = job.record

    def state_fn(rec: JobRecord) -> JobState:
        # Re-read the registry: a final_state recorded while we follow ends the follow without a query.
        return job_state(registry.find(rec.job_id))

    sink = make_sink(
        sys.stdout,
        sys.stderr,
        os.environ,
        json_lines=args.json,
        no_color=args.no_color,
        raw=args.raw,
        timestamps=args.timestamps,
    )
    tail = None
    if args.tail is not None:
        from ddpctl.logs.tail import TailSink

        sink = tail = TailSink(sink, args.tail)
    try:
        show_logs(record, request, sink, state_fn=state_fn, config=follow_config(args))
        if tail is not None:
            tail.finish()
    except BrokenPipeError:
        # The reader went away (`ddpctl logs JOB | head`): stop quietly; stdout pointed at /dev/null keeps the
        # interpreter's last flush of stdout from complaining too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return OK


def remote_words(args: argparse.Namespace) -> list[str]:
    """The remote `logs` command: JSON lines with times, whatever this one shows (its sink renders them here)."""
    from ddpctl.remote.passthrough import option

    words = ["logs", "--errors"] if args.errors else ["logs", "--json", "-t"]
    words += ["-f"] if args.follow else []
    words += ["--poll"] if args.poll else []
    words += ["--no-skip"] if args.no_skip else []
    for flag, value in (
        ("--rank", args.rank),
        ("--node", args.node),
        ("--attempt", args.attempt),
        ("--grep", args.grep),
    ):
        words += [option(flag, value)] if value is not None else []
    return [*words, *(["--", args.job] if args.job else [])]


def remote(args: argparse.Namespace) -> int:
    """The logs of a job on a remote cluster, through its ddpctl (ddpctl.remote.follow); --errors as its text."""
    from ddpctl import __version__
    from ddpctl.logs.output import make_sink
    from ddpctl.remote import follow
    from ddpctl.remote.passthrough import run_remote
    from ddpctl.remote.profiles import clusters_path, find, read_clusters
    from ddpctl.remote.transport import Transport

    if args.errors:
        shown = run_remote(args.cluster, remote_words(args), __version__, as_json=False)
        print(shown.out)
        return shown.code
    path = clusters_path()
    cluster = find(read_clusters(path), args.cluster, path)
    transport = Transport(cluster)
    sink = make_sink(
        sys.stdout, sys.stderr, os.environ, json_lines=args.json, no_color=args.no_color, raw=args.raw,
        timestamps=args.timestamps,
    )  # fmt: skip
    tail = None
    if args.tail is not None:
        from ddpctl.logs.tail import TailSink

        sink = tail = TailSink(sink, args.tail)
    code = follow.show(transport, [*cluster.ddpctl, *remote_words(args)], sink, __version__)
    if tail is not None:
        tail.finish()
    return code
