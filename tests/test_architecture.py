"""The layout's promises, checked on the source: packages import one way along the data flow, no module walk
bounces back, and each "one place" claim (commands, signal names, run-dir names and patterns, safe file opening
and atomic writing) holds, and no module or function outgrows what a reader takes in at once."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ddpctl.spec.capabilities import BACKENDS as CAPABILITY_TABLE

PKG = Path(__file__).resolve().parents[1] / "ddpctl"

# Lower layers first; a module may import from its own package or from a strictly lower layer only.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("exitcodes", "templates", "sanitize", "safeio", "record", "pyargv"),
    ("errors",),
    ("proc",),
    ("spec", "slurm"),
    ("snapshot",),
    ("run",),
    ("runtime",),
    ("integrations",),
    ("health",),
    ("node",),
    ("plan",),
    ("backends",),
    ("logs",),
    ("remote",),
    ("api",),
    ("(init)",),
    ("cli",),
    ("__main__",),
)
LAYER = {name: index for index, names in enumerate(LAYERS) for name in names}


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(PKG.parent).with_suffix("").parts).removesuffix(".__init__")


@functools.cache  # parsed once per session: every check below walks the same trees
def modules() -> dict[str, ast.Module]:
    return {module_name(p): ast.parse(p.read_text()) for p in sorted(PKG.rglob("*.py"))}


def imported(module: str, tree: ast.Module) -> Iterator[str]:
    """Every ddpctl module `module` imports, at any depth (an import inside a function is still a walk)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("ddpctl"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ddpctl"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                is_module = (PKG.parent / Path(*candidate.split("."))).with_suffix(".py").exists() or (
                    PKG.parent / Path(*candidate.split("."))
                ).is_dir()
                yield candidate if is_module else node.module


def package_of(module: str) -> str:
    parts = module.split(".")
    return "(init)" if len(parts) == 1 else parts[1]


def graph() -> dict[str, set[str]]:
    return {name: {m for m in imported(name, tree) if m != name} for name, tree in modules().items()}


def listed_packages(text: str) -> list[str]:
    """The packages a picture of the flow names, in its order: the `name/` words that begin its lines."""
    return [m.group(1) for m in re.finditer(r"^\s{0,4}(\w+)/ ", text, re.MULTILINE)]


def test_the_package_docstring_and_the_readme_picture_name_every_package_in_the_flows_order() -> None:
    packages = sorted((p.name for p in PKG.iterdir() if (p / "__init__.py").exists()), key=lambda n: LAYER[n])
    assert listed_packages(PKG.joinpath("__init__.py").read_text().split('"""')[1]) == packages
    readme = (PKG.parent / "README.md").read_text().split("## Architecture", 1)[1].split("```", 2)[1]
    assert listed_packages(readme) == packages


def test_every_package_has_a_layer() -> None:
    assert {package_of(m) for m in modules()} <= set(LAYER)


def test_packages_import_one_way_along_the_flow() -> None:
    wrong = []
    for module, targets in graph().items():
        source = package_of(module)
        for target in targets:
            dest = package_of(target)
            if dest != source and LAYER[dest] >= LAYER[source]:
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def test_no_module_walk_bounces_back() -> None:
    edges = graph()
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str], done: set[str]) -> None:
        if node in stack:
            cycles.append([*stack[stack.index(node) :], node])
            return
        if node in done:
            return
        done.add(node)
        for nxt in sorted(edges.get(node, ())):
            visit(nxt, [*stack, node], done)

    seen: set[str] = set()
    for start in sorted(edges):
        visit(start, [], seen)
    assert cycles == []


def calls_outside(allowed: set[str], match: Callable[[ast.AST], bool]) -> list[str]:
    """`module:line` of every node `match` accepts, in modules other than `allowed`."""
    found = []
    for name, tree in modules().items():
        if name in allowed:
            continue
        found += [f"{name}:{getattr(node, 'lineno', 0)}" for node in ast.walk(tree) if match(node)]
    return found


def test_only_proc_starts_commands() -> None:
    def starts(node: ast.AST) -> bool:
        if isinstance(node, ast.Import):
            return any(a.name == "subprocess" for a in node.names)
        if isinstance(node, ast.ImportFrom):
            return node.module == "subprocess"
        return (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and (node.value.id == "os" and node.attr in {"system", "popen", "execv", "execvp", "spawnv", "fork"})
        )

    assert calls_outside({"ddpctl.proc"}, starts) == []


SLURM_COMMANDS = {"sbatch", "squeue", "scontrol", "scancel", "srun", "sinfo"}


def test_slurm_command_lines_are_spelled_in_slurm_commands_only() -> None:
    def argv(node: ast.AST) -> bool:  # a list display starting with a Slurm command: an argv being built
        return (
            isinstance(node, ast.List)
            and bool(node.elts)
            and isinstance(node.elts[0], ast.Constant)
            and node.elts[0].value in SLURM_COMMANDS
            and node.elts[0].value != "sbatch"
        ) or (
            isinstance(node, ast.List)
            and len(node.elts) > 1
            and isinstance(node.elts[0], ast.Constant)
            and node.elts[0].value == "sbatch"
            and isinstance(node.elts[1], ast.Constant)
            and str(node.elts[1].value).startswith("-")
        )

    assert calls_outside({"ddpctl.slurm.commands"}, argv) == []


def test_signal_names_become_signals_in_one_function() -> None:
    def converts(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and (node.value.attr == "Signals")
        )

    assert calls_outside({"ddpctl.proc"}, converts) == []


def is_file_pattern(text: str, prefix: str) -> bool:
    """`text` names run-dir files starting with `prefix`: a file name, a glob or a regex for them."""
    return text.removeprefix("^").startswith(prefix) and " " not in text and any(c in text for c in ".*(")


@pytest.mark.parametrize(
    ("text", "prefix", "expected"),
    [
        ("progress-3.json", "progress-", True),
        (r"^progress-(\d+)\.json$", "progress-", True),
        ("listen-rank-*.json", "listen-rank-", True),
        ("attempt-*", "attempt-", True),
        ("attempt-start", "attempt-", False),
        ("attempt-<n>/listen-rank-<r>.json: who listens", "attempt-", False),
    ],
)
def test_file_patterns_are_told_from_event_names_and_prose(text: str, prefix: str, expected: bool) -> None:
    assert is_file_pattern(text, prefix) is expected


@pytest.mark.parametrize(
    "name",
    [
        "supervisor.pid",
        "submitit",
        "preempt-request.json",
        "stopped.json",
        "job.yaml",
        "events.jsonl",
        "slurm.out",
        "rank-",
        "node-",
        "stop-node-",
        "progress-",
        "listen-rank-",
        "attempt-",
        "hang.json",
        "cancel-request.json",
        "supervisor.lock",
        "snapshot.json",
        "job.sbatch",
        "excluded-nodes",
        "spare-restarts-",
        "node-lost.json",
        "left-node-",
        "finished",
        "tracking.json",
        "series-",
        "report.html",
        "summary-node-",
        "fr-request.json",
        "fr-rank-",
        "beat-node-",
        "check-store.json",
        "check-node-",
        ".slurm-",
        "report-sweep-",
        ".staging-",
        "sweep-",
    ],
)
def test_run_dir_names_are_spelled_in_layout_only(name: str) -> None:
    def spells(node: ast.AST) -> bool:
        if isinstance(node, ast.JoinedStr):  # an f-string's literal parts
            return any(isinstance(v, ast.Constant) and str(v.value).startswith(name) for v in node.values)
        return (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and (node.value == name or (name.endswith("-") and is_file_pattern(node.value, name)))
        )  # a file name, glob or regex, not a docstring or an event ("attempt-start")

    # The submitit backend's name is also "submitit"; the capability table, its backend and the CLI's --backend
    # choices use it as a name, not a path.
    # A checkpoint directory's rank-<r>.pt/.json are the runtime's own layout (ddpctl.runtime.ckptdir).
    backend_name = {
        "ddpctl.backends",
        "ddpctl.spec.capabilities",
        "ddpctl.backends.slurm.submitit",
        "ddpctl.cli.common",
        "ddpctl.cli.doctor",
    }
    allowed = {
        "ddpctl.run.layout",
        *(backend_name if name == "submitit" else ()),
        *(("ddpctl.runtime.ckptdir",) if name == "rank-" else ()),
    }
    assert calls_outside(allowed, spells) == []


def test_plan_is_pure_it_neither_runs_commands_nor_asks_slurm() -> None:
    """plan/ decides from facts gathered at the edge (slurm.cluster, cli.doctor): it imports no command runner."""
    edges = graph()
    wrong = [
        f"{module} -> {target}"
        for module, targets in edges.items()
        if module.startswith("ddpctl.plan")
        for target in targets
        if target in {"ddpctl.proc", "ddpctl.slurm.commands"}
    ]
    assert wrong == []


def test_the_cluster_facts_are_gathered_in_one_place() -> None:
    """`scontrol show config/partition/node` are asked by ddpctl.slurm.cluster only, whose ClusterFacts every
    reader shares (no second gather, no second parser of the same text)."""

    def asks(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr in {"show_config", "show_partitions", "show_nodes"}

    assert calls_outside({"ddpctl.slurm.cluster"}, asks) == []


def test_only_safeio_opens_files_without_following_links() -> None:
    def nofollow(node: ast.AST) -> bool:
        return isinstance(node, ast.Attribute) and node.attr == "O_NOFOLLOW"

    assert calls_outside({"ddpctl.safeio"}, nofollow) == []


def test_only_safeio_renames_a_written_file_into_place() -> None:
    """A temp file renamed over its target is safeio.write_atomic's job (temp name, cleanup, O_NOFOLLOW, fsync)."""

    def renames(node: ast.AST) -> bool:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            return False
        func = node.func
        if isinstance(func.value, ast.Name) and func.value.id == "os":
            return func.attr in {"replace", "rename", "renames"}
        # Path.replace(target) takes one argument; str.replace two, dataclasses.replace keywords.
        return func.attr == "replace" and len(node.args) == 1 and not node.keywords

    # The snapshot store publishes an object it copied in and chmod'ed read-only (a copy, not a write).
    assert calls_outside({"ddpctl.safeio", "ddpctl.snapshot.store"}, renames) == []


BACKEND_NAMES = set(CAPABILITY_TABLE)


def names_a_backend(node: ast.AST) -> bool:
    """A backend name as an operand of a comparison (`backend == "local"`, `name in ("sbatch", ...)`), or a case."""

    def spelled(operand: ast.AST) -> bool:
        if isinstance(operand, (ast.Tuple, ast.List, ast.Set)):
            return any(spelled(item) for item in operand.elts)
        return isinstance(operand, ast.Constant) and operand.value in BACKEND_NAMES

    if isinstance(node, ast.Compare):
        return any(spelled(operand) for operand in (node.left, *node.comparators))
    return isinstance(node, ast.MatchValue) and spelled(node.value)


def test_only_backends_branch_on_a_backend_name() -> None:
    """Everywhere else asks the backend's capability (`spec.capabilities.chain`), declared once per backend in
    ddpctl.spec.capabilities: a new backend is a row there and a module in backends/, not a hunt for names."""
    inside = {name for name in modules() if name.startswith("ddpctl.backends")} | {"ddpctl.spec.capabilities"}
    assert calls_outside(inside, names_a_backend) == []


def test_the_check_sees_a_name_comparison() -> None:  # the check above can fail
    tree = ast.parse(
        'if spec.backend == "local" or name in ("sbatch", "x"):\n    pass\nif "submitit" != b:\n    pass\n'
    )
    assert sum(names_a_backend(node) for node in ast.walk(tree)) == 3
    assert not any(names_a_backend(node) for node in ast.walk(ast.parse('if mode == "chain":\n    pass\n')))


def reads_the_local_flag(node: ast.AST) -> bool:
    """The local backend's node flag, named or imported (`env.get(LOCAL_ENV_FLAG)`), or spelled out."""
    if isinstance(node, ast.ImportFrom):
        return any(alias.name == "LOCAL_ENV_FLAG" for alias in node.names)
    return (isinstance(node, ast.Name) and node.id == "LOCAL_ENV_FLAG") or (
        isinstance(node, ast.Constant) and node.value == "DDPCTL_LOCAL"
    )


def test_the_node_side_asks_its_site_not_the_local_flag() -> None:
    """Whether a node is a Slurm step or one of the local backend's simulated nodes is told once
    (ddpctl.node.site.node_site, from the flag ddpctl.node.localenv sets); the rest asks the site."""
    assert calls_outside({"ddpctl.node.localenv", "ddpctl.node.site"}, reads_the_local_flag) == []


def test_the_check_sees_the_local_flag() -> None:  # the check above can fail
    tree = ast.parse("from ddpctl.node.localenv import LOCAL_ENV_FLAG\nif env.get(LOCAL_ENV_FLAG): pass\n")
    assert sum(reads_the_local_flag(node) for node in ast.walk(tree)) == 2
    assert reads_the_local_flag(ast.parse('env.get("DDPCTL_LOCAL")').body[0].value.args[0])  # type: ignore[attr-defined]


def test_every_backend_module_carries_its_row_of_the_capability_table() -> None:
    from ddpctl.backends import MODULES, get_backend
    from ddpctl.spec.capabilities import BACKENDS

    assert set(MODULES) == set(BACKENDS)
    for name, caps in BACKENDS.items():
        backend = get_backend(name)
        assert (backend.name, backend.capabilities) == (name, caps)


# What the rest of ddpctl may import from backends/: the package (the Backend protocol, get_backend, current_state,
# task_states, live_ids) and the modules every backend shares. A backend's own modules (local/*, slurm/*) are
# reached through its Backend only; `ddpctl internal local-run` / `local-sweep`
# (cli.internal) are the local backend's own processes, which it starts as `ddpctl internal ...`.
SHARED_BACKEND_MODULES = {
    "ddpctl.backends",
    "ddpctl.backends.control",
    "ddpctl.backends.names",
    "ddpctl.backends.prune",
}
OWN_PROCESS_ENTRIES = {
    ("ddpctl.cli.internal", "ddpctl.backends.local.supervisor"),
    ("ddpctl.cli.internal", "ddpctl.backends.local.sweep"),
}


def test_the_rest_reaches_a_backend_through_its_protocol() -> None:
    """No `sweeps == QUEUE` branch and no `import backends.sbatch` outside backends/: a sweep, a task's state,
    a cancel and `prune`'s liveness are methods of each backend (ddpctl.backends.Backend)."""
    wrong = [
        f"{module} -> {target}"
        for module, targets in graph().items()
        if not module.startswith("ddpctl.backends")
        for target in targets
        if target.startswith("ddpctl.backends")
        and target not in SHARED_BACKEND_MODULES
        and (module, target) not in OWN_PROCESS_ENTRIES
    ]
    assert wrong == []


def test_a_submission_is_recorded_in_one_place() -> None:
    """The `submitted` event is written by ddpctl.backends.note_submitted only, whichever backend submits."""

    def builds_submitted(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Submitted"

    assert calls_outside({"ddpctl.backends"}, builds_submitted) == []
    assert len(calls_outside(set(), builds_submitted)) == 1  # the check sees the one there: it can fail


def top_level_names(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return names


def test_no_module_defines_a_name_twice() -> None:
    """A second definition silently wins (layout.py once held RANK_PLACEHOLDER twice)."""
    twice = []
    for module, tree in modules().items():
        names = top_level_names(tree)
        twice += sorted(f"{module}.{name}" for name in set(names) if names.count(name) > 1)
    assert twice == []


MAX_MODULE_LINES = 300  # a reader opens one file per concept; past this a module holds two
MAX_FUNCTION_LINES = 48


def test_no_module_is_over_the_line_ceiling() -> None:
    lines = {module_name(p): len(p.read_text().splitlines()) for p in sorted(PKG.rglob("*.py"))}
    assert {module: n for module, n in lines.items() if n > MAX_MODULE_LINES} == {}


def test_no_function_is_over_the_line_ceiling() -> None:
    spans = [
        (f"{module}.{node.name}:{node.lineno}", (node.end_lineno or node.lineno) - node.lineno + 1)
        for module, tree in modules().items()
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    assert [(name, n) for name, n in spans if n > MAX_FUNCTION_LINES] == []
