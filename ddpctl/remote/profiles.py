"""Cluster profiles: `~/.config/ddpctl/clusters.yaml` (or `$DDPCTL_CLUSTERS`), one top-level key per cluster:

    gpu:
      ssh: login.example.org          # anything `ssh` accepts: user@host, a Host alias of ~/.ssh/config
      ddpctl: /opt/venv/bin/ddpctl    # the remote command (default ddpctl); a list or a shell-like string
      workdir: /scratch/me/ddpctl     # the remote work directory (default: the login directory); ~, ~/...
                                      # and $NAME or ${NAME} ($SCRATCH/ddpctl) are expanded there
      defaults: {partition: gpu, account: proj42}   # spec keys merged under specs sent there

Read like a spec (ddpctl.spec.yamldoc: SafeLoader, lines kept, alias bombs refused) and checked key by key:
each failure is one SpecError line naming the file and line, the key, the value and what is allowed.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ddpctl.errors import SpecError
from ddpctl.remote.ssh import workdir_problem
from ddpctl.spec.fields import CLUSTER_RE, as_text, mapping_of, text, text_list
from ddpctl.spec.schema import TOP, convert
from ddpctl.spec.yamldoc import At, Doc, one_line, parse_yaml

ENV_PATH = "DDPCTL_CLUSTERS"
MAX_BYTES = 256 * 1024  # a profile is a few lines; this keeps a stray huge file from eating memory
MAX_CLUSTERS = 256
NAME_RE = CLUSTER_RE
# No whitespace or control characters, and no leading "-": ssh would read the destination as an option.
DESTINATION_RE = r"[^\s\x00-\x1f\x7f-][^\s\x00-\x1f\x7f]{0,254}"
# Spec keys a cluster may default: everything but what names one job, and the choice of cluster itself.
DEFAULT_KEYS = {key: conv for key, conv in TOP.items() if key not in ("name", "script", "args", "cluster")}
# Sections whose sub-keys merge (a spec's own sub-key wins); other keys are replaced whole by the spec's.
MERGED = ("sbatch", "env", "nccl", "requeue", "checkpoint", "health", "container")


@dataclass(frozen=True)
class Cluster:
    name: str
    ssh: str
    ddpctl: tuple[str, ...] = ("ddpctl",)
    workdir: str | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict)


def clusters_path(env: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if env is None else env
    if environ.get(ENV_PATH):
        return Path(environ[ENV_PATH]).expanduser()
    config = environ.get("XDG_CONFIG_HOME") or str(Path("~/.config").expanduser())
    return Path(config) / "ddpctl" / "clusters.yaml"


def read_clusters(path: Path) -> dict[str, Cluster]:
    """The profiles in `path`; a missing file is no clusters (the CLI says where to write one)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return {}
    except OSError as err:
        raise SpecError(f"{one_line(str(path))}: cannot read clusters file: {err.strerror or err}") from err
    if len(data) > MAX_BYTES:
        raise SpecError(f"{one_line(str(path))}: clusters file larger than {MAX_BYTES} bytes")
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SpecError(f"{one_line(str(path))}: cannot read clusters file: not UTF-8 ({err.reason})") from err
    return parse_clusters(content, str(path))


def parse_clusters(content: str, source: str) -> dict[str, Cluster]:
    doc = Doc(source, {})
    root = parse_yaml(content, doc, ())
    if root is None:
        return {}
    at = At(doc)
    table = mapping_of(at, root, "a mapping of cluster names to profiles (gpu: {ssh: login.example.org})")
    if len(table) > MAX_CLUSTERS:
        raise at.error(f"got {len(table)} clusters, expected at most {MAX_CLUSTERS}")
    clusters = {}
    for key, value in table.items():
        name = str(key)
        where = at.child(name)
        if not re.fullmatch(NAME_RE, name):
            raise where.fail(name, f"a cluster name matching {NAME_RE}")
        clusters[name] = _profile(name, value, where)
    return clusters


def _ddpctl_command(value: Any, at: At) -> tuple[str, ...]:
    expected = "a command such as ddpctl, /opt/venv/bin/ddpctl or [python3, -m, ddpctl]"
    if isinstance(value, str):
        try:
            words = tuple(shlex.split(value))
        except ValueError as err:
            raise at.fail(value, f"{expected} ({err})") from None
    else:
        words = text_list()(value, at)
    if not words or any(not word or "\x00" in word or "\n" in word for word in words):
        raise at.fail(value, expected)
    return words


def _destination(value: Any, at: At) -> str:
    result = as_text(value, at, "an ssh destination")
    if not re.fullmatch(DESTINATION_RE, result):
        raise at.fail(result, "an ssh destination (host, user@host or a ~/.ssh/config Host): no spaces, no leading -")
    return result


def _workdir(value: Any, at: At) -> str | None:
    expected = (
        "a directory on the cluster: an absolute path, ~ or ~/..., $NAME/... or ${NAME}/... (expanded there), or "
        "a path from the login directory"
    )
    result: str | None = text(nullable=True, what=expected)(value, at)
    if result is not None and not re.fullmatch(r"[^\x00-\x1f\x7f]{1,4096}", result):
        raise at.fail(result, f"{expected}; at most 4096 characters, none a control character")
    if result is not None and (problem := workdir_problem(result)) is not None:
        raise at.fail(result, f"{expected}; refused: {problem}")
    return result


_PROFILE = {
    "ssh": _destination,
    "ddpctl": _ddpctl_command,
    "workdir": _workdir,
    "defaults": lambda value, at: convert(DEFAULT_KEYS, mapping_of(at, value, "a mapping of spec keys"), at),
}


def _profile(name: str, value: Any, at: At) -> Cluster:
    fields = convert(_PROFILE, mapping_of(at, value, "a profile mapping (ssh: ..., ddpctl: ..., workdir: ...)"), at)
    if "ssh" not in fields:
        raise at.child("ssh").error("missing, expected the ssh destination (user@host or a ~/.ssh/config Host)")
    if isinstance(value, Mapping) and isinstance(value.get("defaults"), Mapping):
        fields["defaults"] = dict(value["defaults"])  # as written: merged into a spec mapping, checked there
    return Cluster(name=name, **{k: v for k, v in fields.items() if v is not None})


def find(clusters: Mapping[str, Cluster], name: str, source: Path) -> Cluster:
    """The profile called `name`, or one line: the names there are, with a did-you-mean."""
    if name in clusters:
        return clusters[name]
    if not clusters:
        raise SpecError(f"unknown cluster {name!r}: no clusters defined in {source} (README: From your laptop)")
    import difflib  # here: only a misspelt name needs it

    guess = difflib.get_close_matches(name, list(clusters), n=1, cutoff=0.6)
    hint = f"did you mean {guess[0]!r}?" if guess else "expected one of " + ", ".join(sorted(clusters))
    raise SpecError(f"unknown cluster {one_line(name)!r} in {source}, {hint}")


def with_defaults(spec: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """A spec mapping with the cluster's defaults under it: the spec's own keys win, and in a section or in
    sbatch/env each of its sub-keys wins over the default's."""
    out = dict(defaults)
    for key, value in spec.items():
        base = out.get(key)
        if key in MERGED and isinstance(base, Mapping) and isinstance(value, Mapping):
            out[key] = {**base, **value}
        else:
            out[key] = value
    return out
