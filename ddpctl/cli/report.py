"""`ddpctl report [JOB_ID|NAME|SWEEP] [-o FILE]`: one self-contained HTML file telling the run's story.

A remote job's report (`--cluster NAME`, or a job submitted from here to a cluster) is written by the cluster's
ddpctl, which reads the run dir, printed (`--output=-`), checked (ddpctl.remote.passthrough.fetch_report) and
written here."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ddpctl.cli.common import add_cluster_arg, add_job_arg, found_remote, note, remote_ref

# Opens a written report: None when it did, else one line saying why not (the seam tests inject).
Opener = Callable[[Path], "str | None"]


def add(sub: Any) -> None:
    parser = sub.add_parser(
        "report",
        help="write one HTML file with the run's attempts, step time, throughput, loss, busy/wait",
        description=(
            "Writes a self-contained HTML report (inline SVG, no script, nothing fetched when opened) and prints "
            "its path. Works on a running job (a snapshot of now) and after the end; a sweep gets one report "
            "with its points side by side."
        ),
    )
    add_job_arg(parser, "job id, name or sweep (default: the most recently submitted job)", nargs="?")
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        help="where to write it (default: report.html in the run dir, or beside a sweep's; for a remote job"
        " report-<cluster>-<job>.html here); - writes it to standard output",
    )
    parser.add_argument(
        "--open", action="store_true", help="also open it in a browser, where one is found (the path is printed anyway)"
    )
    add_cluster_arg(parser, "the job of this remote cluster (clusters.yaml): its ddpctl writes the report, sent here")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, opener: Opener | None = None) -> int:
    from ddpctl import api
    from ddpctl.api.sweeps import find_sweep

    if getattr(args, "cluster", None) or remote_ref(args):
        return remote_report(args, opener)
    sweep = find_sweep(args.job) if args.job is not None else None
    if sweep is not None:
        text, default = sweep_report(sweep)
    else:
        job = api.job(args.job, warn=note)
        if found_remote(args, job):
            return remote_report(args, opener)
        text, default = job_report(job)
    return written(args, text, default, opener)


def written(args: argparse.Namespace, text: str, default: Path, opener: Opener | None) -> int:
    """Write the page where asked (`-`: standard output), print its path, open it if asked."""
    from ddpctl import safeio

    if str(args.output) == "-":
        sys.stdout.write(text)
        return 0
    target = args.output or default
    safeio.write_text_atomic(target, text)
    print(target)
    if getattr(args, "open", False):
        show(target, opener or browser_open)
    return 0


def remote_report(args: argparse.Namespace, opener: Opener | None) -> int:
    from ddpctl import __version__
    from ddpctl.errors import ArgumentError
    from ddpctl.remote.passthrough import fetch_report

    if args.job is None:
        raise ArgumentError("report --cluster: name the job (its id or name there); none was given")
    text = fetch_report(args.cluster, args.job, __version__)
    default = Path(f"report-{plain(args.cluster)}-{plain(args.job)}.html")
    return written(args, text, default, opener)


def plain(word: str) -> str:
    """A word as part of a file name here: letters, digits, dot, dash and underscore kept, the rest `_`."""
    return "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in word)[:80] or "_"


def show(target: Path, opener: Opener) -> None:
    """Open the written report; where no browser is found, say so in one line (the path is printed already)."""
    why = opener(target)
    if why is not None:
        note(f"ddpctl report: not opened: {why}; the report is {target}")


def browser_open(target: Path, find: Callable[[], Any] | None = None) -> str | None:
    """Python's webbrowser, only when it finds a browser here (`find`: webbrowser.get, or a test's stand-in)."""
    import webbrowser

    try:
        browser = (find or webbrowser.get)()
    except webbrowser.Error:
        return "no browser found here (set BROWSER to name one)"
    try:
        started = browser.open(target.resolve().as_uri())
    except OSError as err:
        return f"the browser did not start ({err})"
    return None if started else "the browser did not start"


def job_report(job: Any) -> tuple[str, Path]:
    from ddpctl.health import htmlreport, runreport
    from ddpctl.run.layout import RunLayout
    from ddpctl.snapshot import read_info, summary

    record, state = job.record, job.status()
    layout = RunLayout(Path(record.run_dir))
    head = htmlreport.Header(
        name=record.name,
        job_id=record.job_id,
        state=state.state,
        reason=state.reason,
        backend=record.backend,
        code=summary(read_info(layout.snapshot_file)),
    )
    return htmlreport.run_page(head, runreport.collect(layout.root)), layout.report_file


def sweep_report(sweep: Any) -> tuple[str, Path]:
    from ddpctl.health import htmlreport, runreport

    tasks = [
        htmlreport.SweepTask(job.job_id, job.record.point or "", job.status().state, runreport.collect(job.run_dir))
        for job in sweep.jobs
    ]
    from ddpctl.run.layout import sweep_report_file

    return htmlreport.sweep_page(sweep.name, sweep.array_job, tasks), sweep_report_file(sweep.run_base, sweep.array_job)
