"""Rules across a spec's fields, checked once the per-key tables (ddpctl.spec.schema) have converted each key,
and the files the spec names (`check_files`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ddpctl.spec import mfu, notify
from ddpctl.spec.capabilities import with_containers, with_spares
from ddpctl.spec.fields import CONTAINER_RUNTIMES, time_to_seconds
from ddpctl.spec.resumecheck import check_env_refs, check_resume
from ddpctl.spec.schema import MAX_NODES, MOUNT_RE
from ddpctl.spec.templates import is_template_path, template_names, template_path
from ddpctl.spec.yamldoc import At, Doc

if TYPE_CHECKING:
    from ddpctl.spec.model import JobSpec


def check_spec(spec: JobSpec, doc: Doc) -> None:
    """Rules across fields (the files the spec names: `check_files`)."""
    root = At(doc)
    if spec.gpus_per_node and spec.nproc_per_node > spec.gpus_per_node:
        # NCCL refuses two ranks on one GPU ("Duplicate GPU detected").
        expected = f"at most gpus_per_node ({spec.gpus_per_node}): one rank per GPU"
        raise root.child("nproc_per_node").fail(spec.nproc_per_node, expected)
    limit = time_to_seconds(spec.time) if spec.time else None
    lead = spec.requeue.lead_s
    if spec.requeue.enabled and limit is not None and lead >= limit:
        if "lead_s" in (doc.data.get("requeue") or {}):
            expected = f"less than the time limit (time {spec.time} = {limit} s)"
            raise root.child("requeue").child("lead_s").fail(lead, expected)
        expected = f"more than requeue.lead_s ({lead} s), or requeue.enabled: false"
        raise root.child("time").fail(spec.time, expected)
    if spec.max_restarts > 0 and spec.rendezvous == "static":
        # Static rendezvous keeps one store for every restart round, and a restarted rank reads the last round's
        # addresses from it: its init fails ("Gloo connectFullMesh failed ... Connection refused").
        expected = "c10d or auto with max_restarts > 0 (static rendezvous cannot restart: every round shares one store)"
        raise root.child("rdzv").fail(spec.rdzv, expected)
    _check_spares(spec, root)
    _check_container(spec, root)
    if isinstance(doc.data, Mapping) and "notify" in doc.data:
        notify.check(spec.notify, root.child("notify"))
    check_resume(spec, root)
    mfu.check(spec.mfu, root.child("mfu"))
    check_env_refs(spec, root)


def _check_spares(spec: JobSpec, root: At) -> None:
    if not spec.spare_nodes:
        return
    at = root.child("spare_nodes")
    if not spec.capabilities.spare_nodes:
        # submitit's tasks span every node of the allocation: a step on the healthy part of it is not its to start.
        raise at.error(
            f"backend {spec.backend} cannot restart inside its allocation; spare nodes work with backend "
            f"{with_spares()} (got {spec.spare_nodes})"
        )
    if spec.alloc_nodes > MAX_NODES:
        raise at.fail(spec.spare_nodes, f"at most {MAX_NODES - spec.nodes} (nodes + spare_nodes <= {MAX_NODES})")


def _check_container(spec: JobSpec, root: At) -> None:
    box, at = spec.container, root.child("container")
    if box.runtime is None:
        if box.image is not None:
            raise at.child("runtime").fail(None, "one of " + ", ".join(CONTAINER_RUNTIMES) + " (an image is set)")
        return
    if not spec.capabilities.containers:
        raise at.child("runtime").error(
            f"containers run with backend {with_containers()} only (backend is {spec.backend})"
        )
    if not box.image:
        raise at.child("image").fail(box.image, f"the image for {box.runtime} (container.runtime is set)")
    for i, mount in enumerate(box.mounts):
        if not re.fullmatch(MOUNT_RE, mount):
            raise at.child("mounts").child(str(i)).fail(mount, "SRC[:DST[:OPTIONS]] with absolute paths, no commas")


def check_files(spec: JobSpec, root: At, written: JobSpec) -> None:
    """The script must be a file, the template a shipped name or a .j2 file. `spec` has its paths made absolute
    (`ddpctl.spec.paths`), `written` is the same spec as written: messages show both."""
    if not Path(spec.script).is_file():
        raise root.child("script").fail(written.script, f"an existing file (looked for {spec.script})")
    if template_path(spec.template) is None:
        name = written.template
        if is_template_path(name):
            raise root.child("template").fail(name, f"an existing .j2 file (looked for {spec.template})")
        names = ", ".join(template_names()) or "none installed"
        raise root.child("template").fail(name, f"a shipped template ({names}) or a path to a .j2 file")
