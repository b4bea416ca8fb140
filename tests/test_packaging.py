"""The wheel carries every package: setuptools is given an explicit package list (pyproject.toml), and a
subpackage missing from it installs fine in editable mode but is absent from a wheel, so a user's `pip install`
(or a container image built from the checkout) fails at import while every test of the checkout passes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def wheel_packages() -> set[str]:
    # The one-line TOML array of strings under [tool.setuptools] is also a Python literal (tomllib is 3.11+).
    found = re.search(r"^packages = (\[.*\])$", (REPO / "pyproject.toml").read_text(), re.MULTILINE)
    assert found is not None, "pyproject.toml has no one-line `packages = [...]` under [tool.setuptools]"
    return set(ast.literal_eval(found.group(1)))


def test_every_package_of_the_tree_is_in_the_wheels_package_list() -> None:
    tree = {".".join(init.parent.relative_to(REPO).parts) for init in (REPO / "ddpctl").rglob("__init__.py")}
    missing = tree - wheel_packages()
    assert missing == set(), f"packages missing from pyproject.toml's [tool.setuptools] packages: {missing}"
