"""Every public name of DALI's ``nvidia.dali.auto_aug`` modules is in ``raypipe.auto_aug``'s, a
function with the same parameters (names, order and defaults), and named in the porting guide."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

from raypipe.auto_aug.core import Augmentation

MODULES = ("auto_augment", "rand_augment", "trivial_augment", "augmentations", "core")
DOC = Path(__file__).resolve().parents[2] / "docs" / "porting-from-dali.md"


def _public(module) -> dict[str, object]:
    """The functions and augmentations ``module`` defines."""
    return {
        name: value
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isfunction(value) or type(value).__name__ == "Augmentation")
        and getattr(getattr(value, "op", value), "__module__", None) == module.__name__  # defined there
    }


def _parameters(value) -> list[tuple[str, object]]:
    function = value.op if hasattr(value, "op") else value
    return [(p.name, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize("module", MODULES)
def test_every_public_name_of_dalis_module_is_here_with_its_parameters(module):
    pytest.importorskip("nvidia.dali")
    dalis = importlib.import_module(f"nvidia.dali.auto_aug.{module}")
    theirs = {n: getattr(dalis, n) for n in dalis.__all__ if n[0] != "_"} if module == "core" else _public(dalis)
    ours = importlib.import_module(f"raypipe.auto_aug.{module}")
    assert theirs, module
    documented = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", DOC.read_text(encoding="utf-8")))
    for name, value in theirs.items():
        assert hasattr(ours, name), f"{module}.{name}"
        mine = getattr(ours, name)
        if isinstance(mine, Augmentation):
            assert mine.name == value.name and mine.randomly_negate == value.randomly_negate, name
            assert mine.mag_range == value.mag_range and mine.param_device == value.param_device, name
        assert [n for n, _ in _parameters(mine)] == [n for n, _ in _parameters(value)], f"{module}.{name}"
        if module != "core":
            assert name in documented, f"{module}.{name} is named in docs/porting-from-dali.md"
