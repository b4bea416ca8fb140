"""`ddpctl report [JOB_ID|NAME|SWEEP] [-o FILE]`: one self-contained HTML file telling the run's story."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ddpctl.cli.common import add_job_arg, note


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
        "-o", "--output", type=Path, help="where to write it (default: report.html in the run dir, or beside a sweep's)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ddpctl import api, safeio
    from ddpctl.api.sweeps import find_sweep

    sweep = find_sweep(args.job) if args.job is not None else None
    if sweep is not None:
        text, default = sweep_report(sweep)
    else:
        job = api.job(args.job, warn=note)
        text, default = job_report(job)
    target = args.output or default
    safeio.write_text_atomic(target, text)
    print(target)
    return 0


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
