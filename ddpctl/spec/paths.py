"""Which spec values name files on the submitting host, and making them absolute.

A relative path written in a spec file starts at the file's directory, as in Compose and most file-based tools,
so a spec means the same wherever `ddpctl submit` runs from; a path given in a `--set`, or in a mapping built in
Python (no file), starts at the current directory. `base` below is the caller's answer to "where does this key's
value start": the loader knows which keys a `--set` wrote.

`args`, `env` and `setup` are not paths ddpctl reads: they reach the script and the batch shell as written, and
run in the directory `ddpctl submit` ran in (sbatch's default working directory; the local backend keeps it).
"""

from __future__ import annotations

import dataclasses
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddpctl.spec.templates import is_template_path
from ddpctl.spec.yamldoc import Key

if TYPE_CHECKING:
    from ddpctl.spec.model import JobSpec

# The runtimes whose `image` may be a file or directory on the host, and how each tells a path from a name:
# pyxis reads an image starting with "/" or "." as a squashfs file (else a registry reference); apptainer and
# singularity take a path unless it has a scheme (docker://, library://, oras://); ch-run a path when it holds
# a "/" (else a name in its image storage); podman runs an image starting with "/", "." or "~" as a root
# directory (`--rootfs`, a `:O` suffix = an overlay that keeps the directory unchanged), else a name.
IMAGE_PATH_RULES: dict[str, Callable[[str], bool]] = {
    "pyxis": lambda image: image.startswith((".", "/", "~")),
    "apptainer": lambda image: "://" not in image,
    "singularity": lambda image: "://" not in image,
    "charliecloud": lambda image: "/" in image or image.startswith("~"),
    "podman": lambda image: image.startswith((".", "/", "~")),
}


def path_values(spec: JobSpec) -> dict[Key, str]:
    """The spec's values that are paths on the submitting host, by dotted key (names such as `template: ddp`,
    `python: python3` and registry images are left out)."""
    found: dict[Key, str] = {("script",): spec.script, ("run_dir",): spec.run_dir}
    if spec.checkpoint.dir is not None:
        found["checkpoint", "dir"] = spec.checkpoint.dir
    if is_template_path(spec.template):
        found["template",] = spec.template
    box = spec.container
    if spec.python is not None and "/" in spec.python and not box.enabled:
        found["python",] = spec.python  # in a container it names the image's interpreter
    is_path = IMAGE_PATH_RULES.get(box.runtime or "")
    if is_path is not None and box.image and is_path(box.image):
        found["container", "image"] = box.image
    return found


def with_values(spec: JobSpec, values: Mapping[Key, str]) -> JobSpec:
    """The spec with these dotted keys (top level or one section deep) set."""
    top: dict[str, Any] = {key[0]: value for key, value in values.items() if len(key) == 1}
    for name in {key[0] for key in values if len(key) == 2}:
        inner = {key[1]: value for key, value in values.items() if len(key) == 2 and key[0] == name}
        top[name] = dataclasses.replace(getattr(spec, name), **inner)
    return dataclasses.replace(spec, **top)


def resolve(spec: JobSpec, base: Callable[[Key], Path]) -> JobSpec:
    """The spec with every relative path value made absolute against `base(key)` (only asked for relative ones,
    so a spec of absolute paths needs no current directory)."""
    changed = {}
    for key, value in path_values(spec).items():
        written = str(Path(value).expanduser()) if value.startswith("~") else value
        if not Path(written).is_absolute():
            changed[key] = absolute(written, base(key))
        elif written != value:
            changed[key] = written
    return with_values(spec, changed) if changed else spec


def absolute(value: str, base: Path) -> str:
    """`value` joined to the absolute directory `base`, each `dir/..` folded away where `dir` is a real directory
    (not a symlink: there `..` is the link target's parent, so it stays as written)."""
    parts: list[str] = []
    for part in Path(base.absolute(), value).parts:
        if part == ".." and len(parts) > 1 and parts[-1] != ".." and _real_dir(Path(*parts)):
            parts.pop()
            continue
        parts.append(part)
    return str(Path(*parts))


def _real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False
