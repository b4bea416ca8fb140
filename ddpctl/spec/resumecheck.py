"""Checks of `resume:`, `checkpoint.pattern` and the `$VAR` references in `args` (ddpctl.spec.resume)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ddpctl.spec.fields import choice, text_list
from ddpctl.spec.resume import CKPT_DIR, LATEST, PRESETS, STEP, env_refs, placeholders
from ddpctl.spec.yamldoc import At

if TYPE_CHECKING:
    from ddpctl.spec.model import JobSpec

# The variables every rank of every attempt has (ddpctl.node.torchrun.ddpctl_env): the ones an argument may name
# besides the spec's `env:`. Anything else would reach the script literally, since no shell expands `args`.
JOB_VARIABLES = (
    "DDPCTL_CKPT_DIR", "DDPCTL_RUN_DIR", "DDPCTL_RESTART_COUNT", "DDPCTL_ATTEMPT", "DDPCTL_CKPT_KEEP",
    "DDPCTL_STOP_FILE", "DDPCTL_STOP_LEAD_S", "DDPCTL_NODE", "HOME", "USER",
)  # fmt: skip
MAX_PATTERN = 256


def resume_args_conv(value: Any, at: At) -> tuple[str, ...] | None:
    """`resume.args`: a list of strings; null = the preset's."""
    return None if value is None else text_list()(value, at)


def checkpoint_pattern(value: Any, at: At) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else None
    expected = "a checkpoint name such as step-{step}.pt or checkpoint-{step}/ ({step}, * and ? allowed)"
    if text is None or not text.strip("/") or len(text) > MAX_PATTERN or "/" in text.rstrip("/") or "\0" in text:
        raise at.fail(value, expected, typed=text is None)
    if text.count(STEP) > 1 or "{" in text.replace(STEP, ""):
        raise at.fail(text, expected)
    return text


RESUME_TABLE = {"preset": choice(tuple(PRESETS), nullable=True), "args": resume_args_conv}


def check_resume(spec: JobSpec, root: At) -> None:
    """`{latest}` needs to know what a checkpoint is (a preset or checkpoint.pattern); only known placeholders."""
    at = root.child("resume").child("args")
    for index, arg in enumerate(spec.resume.args or ()):
        for name in placeholders(arg):
            if "{" + name + "}" not in (LATEST, CKPT_DIR):
                raise at.child(str(index)).fail(arg, "placeholders {latest} and {ckpt_dir} only")
    given = spec.resume.args or ()
    if any(LATEST in arg for arg in given) and spec.resume.preset is None and spec.checkpoint.pattern is None:
        raise at.error(
            "{latest} needs to know the script's checkpoints: set resume.preset "
            f"({', '.join(PRESETS)}) or checkpoint.pattern (e.g. step-{{step}}.pt)"
        )


def check_env_refs(spec: JobSpec, root: At) -> None:
    """Every `$NAME` in `args` and `resume.args` is a variable the job sets; else one line naming the argument."""
    known = {*JOB_VARIABLES, *dict(spec.env)}
    lists = [(root.child("args"), spec.args), (root.child("resume").child("args"), spec.resume.args or ())]
    for at, args in lists:
        for index, arg in enumerate(args):
            for name in env_refs(arg):
                if name not in known:
                    allowed = ", ".join(f"${n}" for n in (*JOB_VARIABLES, *dict(spec.env)))
                    raise at.child(str(index)).error(
                        f"{arg!r} refers to ${name}, which the job does not set (args are not run through a "
                        f"shell); expected one of {allowed}, or $$ for a literal $"
                    )
