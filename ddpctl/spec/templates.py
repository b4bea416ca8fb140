"""Where ddpctl's shipped templates live, in a source checkout and in an installed wheel alike."""

from __future__ import annotations

from pathlib import Path

TEMPLATE_SUFFIX = ".sbatch.j2"


def templates_dir() -> Path:
    # In a checkout (and an editable install) the top-level templates/ sits next to the package;
    # a wheel carries the same files as the ddpctl.templates package.
    checkout = Path(__file__).resolve().parents[2] / "templates"  # ddpctl/spec/ -> the checkout
    if checkout.is_dir():
        return checkout
    import importlib

    shipped = importlib.import_module("ddpctl.templates")  # only present in an installed wheel
    return Path(str(shipped.__file__)).parent


def template_names() -> list[str]:
    return sorted(p.name[: -len(TEMPLATE_SUFFIX)] for p in templates_dir().glob(f"*{TEMPLATE_SUFFIX}"))


def template_path(name_or_path: str) -> Path | None:
    """A shipped template by name (`ddp`), or a path to a user's own `.j2` file; None if neither exists."""
    if is_template_path(name_or_path):
        path = Path(name_or_path)
        return path if path.is_file() else None
    path = templates_dir() / f"{name_or_path}{TEMPLATE_SUFFIX}"
    return path if path.is_file() else None


def is_template_path(name: str) -> bool:
    """A `template:` value that is a path to the user's own file rather than a shipped template's name."""
    return "/" in name or name.endswith(".j2")
