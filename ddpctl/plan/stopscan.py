"""A cheap static look at the training script: does it show any sign of handling stops?

Most training code does not (the tutorials' pattern saves every N steps and ignores signals): under ddpctl such a
job keeps training through the warning and loses everything since its last save when Slurm kills it. `submit`
and `doctor` say so once, as a warning: a static look can be wrong, so it never refuses.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

from ddpctl.run.history import StopScanned
from ddpctl.spec import JobSpec

MAX_BYTES = 1 << 20  # bounded work: the first MiB of the script
# Using the runtime, polling the stop file, or installing a signal handler; Lightning and submitit handle the
# signal themselves.
SIGNS = re.compile(
    r"ddpctl\.runtime|from\s+ddpctl\s+import\s+runtime|StopAgreement|DDPCTL_STOP_FILE|ddpctl\.integrations"
    r"|signal\.signal\s*\(|\bsignal\(\s*SIG|lightning|submitit\.helpers"
)
HANDLER = re.compile(r"signal\.signal\s*\(|\bsignal\(\s*SIG|DDPCTL_STOP_FILE|lightning")
# ddpctl.runtime's StopAgreement announces that its rank listens (listen-rank-<r>.json); `preempt` waits for that
# announcement only from a script that can make it. Looked for in the code only: a docstring saying "no
# ddpctl.runtime" (jobs/own_checkpoint) made `preempt` wait a minute for a listener that could never come.
ANNOUNCES = re.compile(
    r"ddpctl\s*\.\s*runtime|from\s+ddpctl\s+import\s+runtime|StopAgreement|ddpctl\s*\.\s*integrations"
)


# A callback named on the script's command line, as a LightningCLI takes it
# (`--trainer.callbacks+=ddpctl.integrations.lightning.StopCallback`): the script's code never names it.
CALLBACK_ARG = re.compile(r"ddpctl\.integrations\.\w+\.\w+")


def code_only(source: str) -> str:
    """The source without its comments and strings (docstrings included); the source itself where it does not
    tokenize (a static look never fails)."""
    skip = {tokenize.COMMENT, tokenize.STRING}
    try:
        tokens = tokenize.generate_tokens(io.StringIO(source).readline)
        return " ".join(t.string for t in tokens if t.type not in skip and not _fstring_part(t.type))
    except (tokenize.TokenError, SyntaxError, ValueError):
        return source


def _fstring_part(kind: int) -> bool:
    return kind in {getattr(tokenize, name, -1) for name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")}


def can_announce(source: str) -> bool:
    """Whether the script's code (not its comments or docstrings) uses ddpctl.runtime's stop agreement."""
    return bool(ANNOUNCES.search(code_only(source)))


def stop_handling_problem(source: str, script_signal: str | None) -> str | None:
    """None when the source shows a sign of handling stops (pure); else what is missing."""
    if script_signal:
        if HANDLER.search(source):
            return None
        return (
            f"requeue.script_signal is {script_signal}, but the script installs no signal handler: the signal's "
            "default action applies"
        )
    if SIGNS.search(source):
        return None
    return (
        "shows no sign of handling stops (no ddpctl.runtime, no $DDPCTL_STOP_FILE poll, no signal handler): a "
        'preemption or time limit loses the work since its own last checkpoint; see README "Scripts with '
        'their own checkpoints"'
    )


def read_source(spec: JobSpec) -> str | None:
    try:
        with Path(spec.script).open("rb") as handle:
            return handle.read(MAX_BYTES).decode(errors="replace")
    except OSError:
        return None  # a missing script is reported elsewhere, with the path


def check_script(spec: JobSpec) -> str | None:
    """The warning for this spec's script, if any ("" reads as no sign). Requeue disabled: nothing to say."""
    if not spec.requeue.enabled or (source := read_source(spec)) is None:
        return None
    problem = stop_handling_problem(source, spec.requeue.script_signal)
    return f"{spec.script}: {problem}" if problem else None


def scan_event(spec: JobSpec) -> StopScanned:
    """What submit records in the run's events: the warning, if any, and whether the script (its code, or a
    ddpctl callback in its args) can announce that its ranks listen, so `preempt` knows at once whether waiting
    for a listener makes sense."""
    source = read_source(spec) or ""
    in_args = any(CALLBACK_ARG.search(arg) for arg in spec.args)
    return StopScanned(warning=check_script(spec), announces=can_announce(source) or in_args)
