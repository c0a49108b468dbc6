"""The runtime dependencies are exactly what the packages import when they load; everything
imported only inside a function (torch, cupy, DALI...), by the GPU kernels or by a framework
plugin (which, like DALI's, needs its framework) is in an extra."""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys

import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("raypipe", "actors", "cluster")
ONLY_ON_A_GPU = "raypipe/kernels/"  # numba kernels, imported by operators on a GPU only
# a framework plugin imports its framework on load, as nvidia.dali.plugin.pytorch does; nothing
# else in the packages imports the plugin, so the framework stays an extra
FRAMEWORK_PLUGINS = {
    "raypipe/plugin/pytorch/__init__.py": "torch",
    "raypipe/plugin/pytorch/fn.py": "torch",
    "raypipe/plugin/pytorch/torch_function.py": "torch",
    "raypipe/plugin/pytorch/experimental/__init__.py": "torch",
    "raypipe/plugin/pytorch/experimental/proxy.py": "torch",
    "raypipe/plugin/lightning.py": "lightning",
}
# import name -> distribution name, for every third-party module the packages import
DISTRIBUTION = {
    "PIL": "pillow",
    "lz4": "lz4",
    "numpy": "numpy",
    "lmdb": "lmdb",
    "ray": "ray",
    "tqdm": "tqdm",
    "crc32c": "crc32c",
    "psutil": "psutil",
    "torch": "torch",
    "lightning": "lightning",
    "cupy": "cupy-cuda13x",
    "numba": "numba",
    "nvidia": "nvidia-nvimgcodec-cu13",
    "soundfile": "soundfile",
    "av": "av",
    "astropy": "astropy",
    "obstore": "obstore",
    "threadpoolctl": "threadpoolctl",
}
# found with importlib.util.find_spec and loaded with ctypes (raypipe/jpeg_turbo.py)
LOADED_BY_PATH = {"turbojpeg"}


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=;! ]", requirement, maxsplit=1)[0].lower()


def _not_on_load(node: ast.AST) -> bool:
    """A function body, or an ``if TYPE_CHECKING:`` block."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return True
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imports() -> tuple[set[str], set[str]]:
    """Third-party top-level modules imported when a module loads, and those imported in functions."""
    on_load, in_functions = set(), set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT).as_posix()
            tree = ast.parse(path.read_text())
            in_function = {id(n) for f in ast.walk(tree) if _not_on_load(f) for n in ast.walk(f)}
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for top in {n.split(".")[0] for n in names} - set(sys.stdlib_module_names) - set(PACKAGES):
                    lazy = (
                        id(node) in in_function
                        or relative.startswith(ONLY_ON_A_GPU)
                        or FRAMEWORK_PLUGINS.get(relative) == top
                    )
                    (in_functions if lazy else on_load).add(top)
    return on_load, in_functions


def test_runtime_dependencies_are_what_loads_and_the_rest_is_in_extras():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_name(r) for r in project["dependencies"]}
    extras = {_name(r) for group in project["optional-dependencies"].values() for r in group}
    on_load, in_functions = _imports()
    unknown = (on_load | in_functions) - set(DISTRIBUTION)
    assert not unknown, f"map these imports to their distribution in DISTRIBUTION: {sorted(unknown)}"
    assert {DISTRIBUTION[m] for m in on_load} | LOADED_BY_PATH == core
    missing = {DISTRIBUTION[m] for m in in_functions} - core - extras
    assert not missing, f"imported in functions but in no extra: {sorted(missing)}"


def test_importing_the_packages_loads_no_framework():
    """The framework plugins are leaves: importing every other module loads no torch, so the
    service and the numpy iterators run without the torch extra."""
    modules = sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if path.relative_to(ROOT).as_posix() not in FRAMEWORK_PLUGINS
        and not path.relative_to(ROOT).as_posix().startswith(ONLY_ON_A_GPU)
    )
    code = f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\nprint('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def _cuda_neutral(requirement: str, major: str) -> str:
    """A GPU requirement with its CUDA major version taken out (``cupy-cuda13x`` -> ``cupy-cudaXx``,
    ``numba-cuda[cu13]`` -> ``numba-cuda[cuX]``), to compare the per-CUDA extras."""
    return requirement.replace(f"cuda{major}x", "cudaXx").replace(f"cu{major}", "cuX")


def test_gpu_extras_differ_only_by_their_cuda_major_version():
    """``gpu-cu12`` and ``gpu-cu13`` name the same components (cupy, numba-cuda with its compiler,
    nvImageCodec with nvJPEG) at the same versions, each for its own CUDA major and no other: one
    extra never brings a second cupy or another CUDA's runtime."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "gpu" not in extras, "an extra without a CUDA major installs the wrong cupy on half the machines"
    cu12, cu13 = extras["gpu-cu12"], extras["gpu-cu13"]
    assert sorted(_cuda_neutral(r, "12") for r in cu12) == sorted(_cuda_neutral(r, "13") for r in cu13)
    for major, group in (("12", cu12), ("13", cu13)):
        other = "13" if major == "12" else "12"
        text = " ".join(group)
        assert f"cu{other}" not in text and f"cuda{other}" not in text, group
        names = {_name(r) for r in group}
        assert sum(n.startswith("cupy") for n in names) == 1, group
        assert f"numba-cuda[cu{major}]" in text, "numba-cuda without its CUDA extra has no NVVM to compile with"
        assert f"nvidia-nvimgcodec-cu{major}[nvjpeg]" in text, "nvImageCodec decodes JPEG on the GPU only with nvJPEG"
