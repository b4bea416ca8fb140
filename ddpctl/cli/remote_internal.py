"""`ddpctl internal remote-submit | remote-preview | code-put`: the cluster's half of `submit --cluster` and
`sweep --cluster` (and of `submit --dry-run --cluster`, `sweep --dry-run --cluster`, `doctor --cluster`:
remote-preview), run by the laptop's ddpctl over SSH
(ddpctl.remote.send), each reading its request on standard input.

remote-submit first checks the request: another ddpctl version, or objects of the tree the store lacks, are
answered (`{"ok": false, "version": ..., "missing": [...]}`) without submitting, so an unchanged resubmit is
one round trip and a changed one three (ask, code-put, ask again).

remote-submit is idempotent per tag: its outcome is written under the tag before it is printed, under a lock
held for the whole submission, so a laptop whose connection dropped asks again with the same tag and gets the
job that was submitted (or the one-line error), never a second job; a submission that died on the way (any
exception, a kill) leaves an outcome saying so, written before it submitted. It ignores SIGHUP and a closed output, so a
dropped connection does not stop a submission halfway.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def add(inner: Any) -> None:
    put = inner.add_parser("code-put", help="objects on stdin ('<id> <size>' then the bytes, each): store them")
    put.set_defaults(func=run_put)
    submit = inner.add_parser("remote-submit", help="submit the laptop's request on stdin (submit --cluster)")
    submit.add_argument("--tag", required=True, help="the submission's tag: asked again, the same outcome")
    submit.set_defaults(func=run_submit)
    preview = inner.add_parser("remote-preview", help="the laptop's dry-run or doctor request on stdin (--cluster)")
    preview.set_defaults(func=run_preview)


def run_put(args: argparse.Namespace) -> int:
    from ddpctl.remote.receive import receive_all, store_of

    count, total = receive_all(store_of(), sys.stdin.buffer.fileno())
    print(json.dumps({"objects": count, "bytes": total}))
    return 0


def run_submit(args: argparse.Namespace) -> int:
    from ddpctl.remote.receive import MAX_REQUEST, outcome_path

    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a dropped connection must not stop it halfway
    outcome = submit_once(outcome_path(args.tag), lambda: json.loads(sys.stdin.buffer.read(MAX_REQUEST)))
    with contextlib.suppress(OSError):  # the laptop may be gone: the outcome waits under the tag
        print(json.dumps(outcome), flush=True)
    return 0


def submit_once(
    path: Path,
    read_request: Callable[[], dict[str, Any]],
    submit: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The outcome under the tag `path` names, submitting the request (`submit`, submit_request by default) the
    first time. An outcome saying "started, not finished" is written before submitting: a process that dies on
    the way (any exception, a kill) leaves it, and an ask again with the tag gets it, never a second job."""
    import fcntl

    from ddpctl import safeio
    from ddpctl.remote.receive import home, read_outcome, write_outcome
    from ddpctl.remote.storegc import using

    fd = safeio.open_fd(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a second ask with the tag waits for the first to finish
        outcome = read_outcome(path)
        if outcome is None:
            request = read_request()
            with using(home()):
                outcome = lacking(request)  # not kept under the tag: nothing was submitted
                if outcome is None:
                    write_outcome(path, unfinished(path.name))
                    outcome = (submit or submit_request)(request)
                    write_outcome(path, outcome)
            outcome = with_freed(outcome, request)
    finally:
        os.close(fd)
    return outcome


def unfinished(tag: str) -> dict[str, Any]:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    return {
        "ok": False,
        "code": 1,
        "error": f"the submission tagged {tag} started at {when} on the cluster and did not finish (its process "
        "ended): it may have submitted a job; look at the cluster's jobs (list --cluster) before submitting again",
    }


def lacking(request: dict[str, Any]) -> dict[str, Any] | None:
    """What keeps the request from being submitted here: another version, objects not in the store."""
    from ddpctl import __version__
    from ddpctl.remote.receive import missing, store_of
    from ddpctl.snapshot.collect import LINK

    if request.get("version") != __version__:
        return {"ok": False, "version": __version__, "missing": []}
    objects = [[row[3], row[4]] for row in request["tree"] if row[1] != LINK]
    absent = missing(store_of(), objects)
    return {"ok": False, "version": __version__, "missing": absent} if absent else None


def submit_request(request: dict[str, Any]) -> dict[str, Any]:
    """The outcome of one request: the job (ddpctl.api.outcome) or the sweep, or the one-line error."""
    from ddpctl.errors import DdpctlError

    try:
        if request.get("sweep") is not None:  # `sweep --cluster`: the same tag, the same outcome kept
            from ddpctl.cli.remote_sweep_there import sweep_job

            return {"ok": True, **sweep_job(request)}
        return {"ok": True, **submit_job(request)}
    except DdpctlError as err:
        return {"ok": False, "error": str(err), "code": err.exit_code}
    except Exception as err:  # a job may have been submitted: the outcome is kept under the tag all the same
        return {"ok": False, "error": f"remote submit failed: {type(err).__name__}: {err}"[:500], "code": 1}


def run_preview(args: argparse.Namespace) -> int:
    """`submit --dry-run` or `doctor` of the laptop's spec here, on its code: nothing is submitted, nothing is
    kept but the code's objects and tree (what a submission of it would reuse)."""
    from ddpctl.remote.receive import MAX_REQUEST, home
    from ddpctl.remote.storegc import using

    request = json.loads(sys.stdin.buffer.read(MAX_REQUEST))
    with using(home()):
        outcome = lacking(request) or previewed(request)
    print(json.dumps(with_freed(outcome, request)), flush=True)
    return 0


def with_freed(outcome: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """The outcome of a request that built or reused its tree, with a note saying what pruning the cluster's
    code store freed (ddpctl.remote.storegc); pruning never fails a request."""
    from ddpctl.errors import DdpctlError
    from ddpctl.remote.receive import home, items_of, store_of
    from ddpctl.remote.storegc import prune
    from ddpctl.run.registry import Registry
    from ddpctl.snapshot.copy import Resolved

    if not outcome.get("ok"):
        return outcome  # no tree built (objects missing: the ones just sent may be all it has), or refused
    try:
        keep = Resolved(items_of(request["tree"]), 0).tree_id
        freed = prune(home(), store_of(), keep, Registry.from_env().records())
    except (OSError, DdpctlError):
        return outcome
    line = freed.line() if freed is not None else None
    return {**outcome, "notes": [*outcome.get("notes", []), line]} if line else outcome


def previewed(request: dict[str, Any]) -> dict[str, Any]:
    """What the dry-run or doctor printed and its exit status, or its one-line error."""
    from ddpctl.errors import ArgumentError, DdpctlError

    shown = io.StringIO()
    try:
        with contextlib.redirect_stdout(shown):
            if request.get("action") == "doctor":
                from ddpctl.cli.doctor import diagnose

                code = diagnose(spec_of(request))
            elif request.get("action") == "dry-run":
                from ddpctl.cli.submit import dry_run

                code = dry_run(spec_of(request))
            elif request.get("action") == "sweep-dry-run":
                from ddpctl.cli.remote_sweep_there import sweep_preview

                code = sweep_preview(request)
            else:
                raise ArgumentError(
                    f"remote-preview: action {str(request.get('action'))[:40]!r}: expected dry-run, doctor or "
                    "sweep-dry-run"
                )
    except DdpctlError as err:
        return {"ok": False, "error": str(err), "code": err.exit_code}
    return {"ok": True, "lines": shown.getvalue().splitlines(), "code": code}


def spec_of(request: dict[str, Any]) -> Any:
    """The laptop's spec, read from its place in the code tree built here, the cluster's defaults under it."""

    from ddpctl.remote.receive import items_of, remote_spec, store_of
    from ddpctl.remote.trees import tree_of

    code = tree_of(store_of(), items_of(request["tree"]))
    overrides = [*request.get("overrides", []), *([f"backend={request['backend']}"] if request.get("backend") else [])]
    return remote_spec(code, request["spec"], request["text"], request.get("defaults") or {}, overrides, cwd=Path.cwd())


def submit_job(request: dict[str, Any]) -> dict[str, Any]:
    """The request submitted here through the API's submit policy; the outcome as fields (job, run dir, what
    `submit` says of it, the policy's warnings), which the laptop prints as `submit` prints them here."""
    from ddpctl import api
    from ddpctl.api.outcome import outcome_of

    warnings: list[str] = []
    job, plan = api.submit_checked(
        spec_of(request), allow_duplicate=bool(request.get("allow_duplicate")), warn=warnings.append
    )
    return outcome_of(job, plan, warnings).as_json()
