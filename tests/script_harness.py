"""Run a DALI user's script unchanged under raypipe, and its CPU-only variant under DALI.

A script is written as a DALI user writes it (``from nvidia.dali ...``). :func:`ported` renames the
import and runs it with ``device_id=0`` on a machine without a GPU (raypipe warns and runs on the
CPU); :func:`as_dali_cpu` makes the same script CPU-only for DALI's CPU build (``device="cpu"``,
``device_id=None``, no ``.gpu()``), so that both can be compared. A script leaves what it saw in
a ``RESULT`` dict; the names it is given (``DATA`` and any others) are globals of the script.
"""

from __future__ import annotations

import collections
import gc
import itertools
import linecache
import re
import sys
import types
import warnings
from collections.abc import Iterable
from typing import Any

from raypipe.backend import GpuUnavailableWarning

_SCRIPTS = itertools.count()


def as_raypipe(script: str) -> str:
    """The script with DALI's import renamed, nothing else (``from nvidia import dali`` becomes
    ``import raypipe as dali``)."""
    return script.replace("from nvidia import dali", "import raypipe as dali").replace("nvidia.dali", "raypipe")


def as_dali_cpu(script: str, edits: Iterable[tuple[str, str]] = ()) -> str:
    """The script for DALI's CPU-only build: every operator on the CPU, no device.

    ``edits`` are further ``(old, new)`` replacements for what the general ones cannot see (a
    device id passed in a variable, a device named in single quotes); each must occur."""
    for old, new in edits:
        assert old in script, f"edit {old!r} does not occur in the script"
        script = script.replace(old, new)
    script = re.sub(r'(device\s*=\s*)"(mixed|gpu)"', r'\1"cpu"', script).replace("dali_cpu=False", "dali_cpu=True")
    script = re.sub(r"(device_id\s*=\s*)0\b", r"\1None", script.replace(".gpu()", ""))
    return script.replace("seed=12 + device_id", "seed=12").replace("seed=12 + rank", "seed=12")


def run_script(script: str, data: str, **names: Any) -> dict:
    """Run ``script`` as module ``ported_script`` with ``DATA`` and ``names`` as globals; return its
    ``RESULT``. The module is in ``sys.modules`` while it runs, as a script's own module is (the
    ``dataclasses`` decorator looks it up), and its source is in ``linecache``, as a file's is (DALI's
    conditionals read a pipeline function's source)."""
    module = types.ModuleType("ported_script")
    module.__dict__.update(DATA=data, **names)
    filename = f"<ported script {next(_SCRIPTS)}>"
    linecache.cache[filename] = (len(script), None, script.splitlines(keepends=True), filename)
    sys.modules[module.__name__] = module
    try:
        exec(compile(script, filename, "exec"), module.__dict__)
        return module.__dict__["RESULT"]
    finally:
        del sys.modules[module.__name__]
        linecache.cache.pop(filename, None)
        # the script's pipelines (and their worker processes) go now, not at the next collection:
        # its functions and globals hold each other
        module.__dict__.clear()
        gc.collect()


def ported(script: str, data: str, **names: Any) -> dict:
    """Run ``script`` under raypipe (import renamed) and check that ``device_id=0`` warned."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_script(as_raypipe(script), data, **names)
    assert any(issubclass(w.category, GpuUnavailableWarning) for w in caught), "device_id=0 without a GPU warns"
    return result


def structure(result: dict) -> dict:
    """What DALI and raypipe must agree on: steps, shapes, dtypes and each epoch's labels as a multiset."""
    return {
        "len": result["len"],
        "epochs": [
            (
                [(shape, dtype) for shape, dtype, _ in steps],
                collections.Counter(label for *_, ls in steps for label in ls),
            )
            for steps in result["epochs"]
        ],
    }
