"""The spec schema as tables and validation of a parsed Doc against it, key by key (`--set` overrides:
`overrides`; rules across keys and the files the spec names: `crossfields`).

Validation returns plain keyword dicts (sections as nested dicts holding only the keys given, so the dataclass
defaults apply); `ddpctl.spec` turns them into the frozen dataclasses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ddpctl.spec import mfu, notify
from ddpctl.spec.capabilities import BACKENDS
from ddpctl.spec.fields import (
    CLUSTER_RE,
    CONTAINER_RUNTIMES,
    IFNAME_RE,
    SBATCH_OPTION_RE,
    SCRIPT_SIGNALS,
    SIGNALS,
    Conv,
    as_text,
    boolean,
    choice,
    env_names,
    env_vars,
    integer,
    job_name,
    mapping_of,
    number,
    switch_or_auto,
    text,
    text_list,
    trackers,
)
from ddpctl.spec.resumecheck import RESUME_TABLE, checkpoint_pattern
from ddpctl.spec.sbatchkeys import MAX_PER_NODE, SBATCH_KEY, SBATCH_KEYS
from ddpctl.spec.yamldoc import At, Doc

# Input limits (README "Input limits"): far above any real cluster, low enough that everything ddpctl does per
# node or per rank (dry run, hostlists, log merging) stays fast.
MAX_NODES = 16_384
# health.node_check_every_min: each check costs an interpreter start; more often than every 3 s it is a busy loop
# beside training, not a check (tests use the floor).
MIN_EVERY_MIN = 0.05

# sbatch options ddpctl writes itself: a second value would fight the template (or break signals/logs).
RESERVED_SBATCH = {
    "job-name": "use name", "nodes": "use nodes", "ntasks": "one task per node; use nodes",
    "ntasks-per-node": "one task per node; use nproc_per_node",
    **{key.option: f"use {key.key}" for key in SBATCH_KEYS},
    "signal": "use requeue.signal and requeue.lead_s",
    "requeue": "use requeue.enabled", "no-requeue": "use requeue.enabled",
    "output": "logs go under run_dir", "error": "logs go under run_dir",
    "open-mode": "output is appended across requeues", "wrap": "use script",
}  # fmt: skip

# Real sbatch long options that are also prefixes of a reserved one: an exact name wins over a prefix in
# getopt_long, so --gpus stays --gpus (not --gpus-per-node).
EXACT_SBATCH_OPTIONS = frozenset({"gpus"})


def reserved_options(name: str) -> list[str]:
    """The reserved options `name` may mean to sbatch. sbatch (getopt_long) accepts any unambiguous prefix of a
    long option, in #SBATCH lines too (`--job-n=x` is --job-name, Slurm 22.05): a prefix of a reserved option
    is refused like the option itself."""
    if name in RESERVED_SBATCH:
        return [name]
    if name in EXACT_SBATCH_OPTIONS:
        return []
    return sorted(option for option in RESERVED_SBATCH if option.startswith(name))


SECTIONS: dict[str, dict[str, Conv]] = {
    "nccl": {
        "socket_ifname": text(IFNAME_RE, nullable=True),
        "ib_disable": boolean,
        "debug": choice(("VERSION", "WARN", "INFO", "TRACE"), nullable=True),
        "timeout_s": integer(1),
        "async_error_handling": boolean,
    },
    "requeue": {
        "enabled": boolean,
        "signal": choice(SIGNALS, strip="SIG"),
        "lead_s": integer(1, 65535),  # Slurm's --signal=SIG@T caps T at 65535 s
        "max_preemptions": integer(0),
        "max_timeouts": integer(0),
        "max_failures": integer(0),
        "max_node_failures": integer(0),
        "max_stalled_attempts": integer(0),
        "script_signal": choice(SCRIPT_SIGNALS, strip="SIG", nullable=True),
        "mode": choice(("auto", "requeue", "chain")),
    },
    "checkpoint": {"dir": text(nullable=True, path=True), "keep": integer(1), "pattern": checkpoint_pattern},
    "health": {
        "hang_timeout_s": integer(0, nullable=True),
        "hang_floor_s": integer(1),
        "startup_s": integer(1),
        "checkpoint_s": integer(0),
        "pause_s": integer(0),
        "straggler_factor": number(0),
        "straggler_steps": integer(2),
        "preflight": switch_or_auto,
        "preflight_timeout_s": integer(5, 3600),
        "node_check": text(nullable=True, what="a shell command (the site's node check)"),
        "node_check_timeout_s": integer(1, 3600),
        "node_check_every_min": number(MIN_EVERY_MIN, 1440, nullable=True),  # a day at most
    },
    "container": {
        "runtime": choice(CONTAINER_RUNTIMES, nullable=True),
        "image": text(nullable=True, what="an image (name, file or directory, as the runtime takes it)"),
        "mounts": text_list(),
        "workdir": text(nullable=True, what="a directory path inside the image"),
        "env": env_names,
        "options": text_list(),
    },
    "notify": notify.TABLE,
    "resume": RESUME_TABLE,
    "mfu": mfu.TABLE,
}
FREE_MAPS = ("env", "sbatch")  # sub-keys are the user's names, checked by pattern
# SRC[:DST[:OPTS]], absolute; pyxis and apptainer take mounts as one comma-separated list
MOUNT_RE = r"/[^,:]*(:/[^,:]*(:[A-Za-z0-9=+_-]+)?)?"


def _sbatch_options(value: Any, at: At) -> tuple[tuple[str, str | int | bool], ...]:
    """`true` = a flag without value; `false` = left out (so a --set can switch a file's flag off)."""
    out: list[tuple[str, str | int | bool]] = []
    for key, item in mapping_of(at, value, "a mapping of sbatch long options to values").items():
        name, where = str(key), at.child(str(key))
        if not re.fullmatch(SBATCH_OPTION_RE, name):
            raise where.fail(name, f"an sbatch long option name matching {SBATCH_OPTION_RE}")
        if reserved := reserved_options(name):
            if reserved == [name]:
                raise where.error(f"ddpctl sets --{name} itself: {RESERVED_SBATCH[name]}")
            means = " or ".join(f"--{r}" for r in reserved)
            raise where.error(
                f"--{name} is an abbreviation sbatch reads as {means}, which ddpctl sets itself: "
                f"{RESERVED_SBATCH[reserved[0]]}"
            )
        if item is False:
            continue
        if item is True or (isinstance(item, int) and where.raw() in (None, str(item))):
            out.append((name, item))
            continue
        option = as_text(item, where, "a string, an integer or true/false")
        if "\n" in option or "\r" in option:
            raise where.fail(option, "a single-line value")
        out.append((name, option))
    return tuple(out)


def unknown_key(at: At, known: list[str]) -> Exception:
    import difflib  # here: only a misspelt key needs it, and every `render` and `submit` would pay its import

    from ddpctl.spec.hints import hint as alias_hint

    # The tables first: difflib finds `sbatch` in `batch_size`
    guess = difflib.get_close_matches(at.path[-1], known, n=1, cutoff=0.6)
    hint = alias_hint(at.path[-1], known) or (f"did you mean '{guess[0]}'?" if guess else None)
    hint = hint or "expected one of " + ", ".join(known)
    return at.error(f"unknown key, {hint}")


def convert(table: Mapping[str, Conv], value: Mapping[Any, Any], at: At) -> dict[str, Any]:
    """Convert the keys present in `value` with `table`; keys not in the table are errors."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        where = at.child(str(key))
        conv = table.get(str(key))
        if conv is None:
            raise unknown_key(where, list(table))
        out[str(key)] = conv(item, where)
    return out


def section(table: Mapping[str, Conv]) -> Conv:
    expected = "a mapping with keys " + ", ".join(table)

    def conv(value: Any, at: At) -> dict[str, Any]:
        return convert(table, mapping_of(at, value, expected), at)

    return conv


MAX_GLOBS = 256


def globs(value: Any, at: At) -> tuple[str, ...]:
    """`snapshot_exclude`: gitignore-style globs (ddpctl.snapshot.ignore), a bounded list."""
    items = text_list()(value, at)
    if len(items) > MAX_GLOBS:
        raise at.error(f"got {len(items)} patterns, expected at most {MAX_GLOBS}")
    for index, item in enumerate(items):
        if not item.strip("!/ ") or len(item) > 1024 or "\n" in item:
            raise at.child(str(index)).fail(item, "a glob such as data/ or *.csv, or !glob to keep a file")
    return tuple(items)


TOP: dict[str, Conv] = {
    "name": job_name,
    "script": text(what="a path to the training script", path=True),
    "args": text_list(),
    "nodes": integer(1, MAX_NODES),
    "gpus_per_node": SBATCH_KEY["gpus_per_node"].convert,
    "nproc_per_node": integer(1, MAX_PER_NODE, nullable=True),  # null/absent: gpus_per_node if > 0 else 1
    **{key.key: key.convert for key in SBATCH_KEYS if key.key != "gpus_per_node"},  # cpus_per_task, mem, ..., qos
    "sbatch": _sbatch_options,
    "setup": text_list(lines=True),
    "env": env_vars,
    "run_dir": text(what="a directory path", path=True),
    "template": text(what="a template name or a path to a .j2 file", path=True),
    "backend": choice(tuple(BACKENDS)),
    "max_restarts": integer(0),
    "spare_nodes": integer(0, MAX_NODES),
    "rdzv": choice(("auto", "c10d", "static")),
    "python": text(nullable=True, what="an interpreter name or path", path=True),
    "snapshot": choice(("auto", "git", "dir", "off")),
    "snapshot_exclude": globs,
    "tracking": trackers,
    "cluster": text(CLUSTER_RE, nullable=True),
    **{name: section(table) for name, table in SECTIONS.items()},
}


def _notify_section(value: Any, at: At) -> dict[str, Any]:
    """`notify:`, where a webhook URL or SMTP password written in the spec gets its own answer (a secret)."""
    if isinstance(value, Mapping) and "webhook_url" in value:
        notify.secret_url(value["webhook_url"], at.child("webhook_url"))
    if isinstance(value, Mapping) and "smtp_password" in value:
        notify.secret_password(value["smtp_password"], at.child("smtp_password"))
    return dict(section(notify.TABLE)(value, at))


TOP["notify"] = _notify_section
REQUIRED = ("name", "script")


def validate(doc: Doc) -> dict[str, Any]:
    root = At(doc)
    if not isinstance(doc.data, Mapping):
        raise root.fail(doc.data, "a mapping of spec keys (name: ..., script: ...)", typed=True)
    out = convert(TOP, doc.data, root)
    for name in REQUIRED:
        if name not in out:
            raise root.child(name).error(f"missing, expected {'a job name' if name == 'name' else 'a path'}")
    if out.get("nproc_per_node") is None:
        out["nproc_per_node"] = out.get("gpus_per_node", 0) or 1
    return out
