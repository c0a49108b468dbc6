"""Shared fixtures: a small folder of real JPEG files, generated once per session.

Without a usable GPU, numba's CUDA simulator is switched on before anything imports numba, so
that the batched kernels (raypipe/kernels) run their own code on the CPU; with a GPU the same
tests run the compiled kernels.
"""

from __future__ import annotations

import compileall
import faulthandler
import os
import sys
from typing import Any

import pytest

from raypipe.backend import gpu_available
from raypipe.datasets import make_jpeg_folder
from tests.s3_server import s3_server, set_env  # noqa: F401 (a fixture)

# Enabled before pytest's own faulthandler plugin starts, so that pytest enables it again once the
# session is over: a crash while the interpreter exits (after the summary) then prints every
# thread's stack instead of a bare "Segmentation fault".
faulthandler.enable()

if not gpu_available():
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

set_env()  # before any Ray cluster starts: its workers read the test S3 server too

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("raypipe", "actors", "cluster", "tests", "examples", "benchmarks")


def pytest_configure(config: pytest.Config) -> None:
    """The project's modules compiled to bytecode once (only those changed since): where
    ``PYTHONDONTWRITEBYTECODE`` is set, every Ray worker process the suite starts (hundreds)
    would otherwise compile all it imports from source again, about 0.35 s of CPU each."""
    for package in PACKAGES:
        compileall.compile_dir(os.path.join(ROOT, package), quiet=2, workers=1)


#: What starts Ray (a local instance, a simulated cluster, a process that does) or counts what all
#: processes share (the shared-memory segments in /dev/shm): these run one after another in one
#: pytest-xdist worker, never beside each other; every other test goes to whichever worker is free.
#: With 2 cores, that worker's Ray processes and the numeric tests of the other worker share the
#: machine (the suite in about three quarters of its serial time).
RAY_TESTS = (
    "tests/cluster/",
    "tests/bench/",
    "tests/actors/",
    "tests/plugin/test_lightning.py",
    "tests/test_pipeline_lifecycle.py",
    "tests/test_source_workers.py",
)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's scheduling by scope, :data:`RAY_TESTS` being one scope (one worker, in order)
    and every other test a scope of its own. (Its ``xdist_group`` marks do not reach the scheduler
    under pytest 9, which names tests by ``_id``.)"""
    from xdist.scheduler import LoadScopeScheduling

    class RayTestsInOrder(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "ray" if nodeid.startswith(RAY_TESTS) else nodeid

    return RayTestsInOrder(config, log)


_SESSION = pytest.StashKey["pytest.Session"]()


def pytest_sessionfinish(session: pytest.Session) -> None:
    session.config.stash[_SESSION] = session


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """End a test process that used Ray with its exit status, without the interpreter's teardown.

    This process starts and stops dozens of Ray sessions and simulated clusters. Ray leaves
    native gRPC and GCS-client threads running after each ``ray.shutdown()`` (it does not
    support restarting in one process: ray-project/ray#31145), and the C++ static destructors
    that run at exit can then crash under them, after every test has passed and the summary is
    out. Behaviour at exit of raypipe's own processes is tested in subprocesses, not here."""
    session = config.stash.get(_SESSION, None)
    if session is None or "ray" not in sys.modules:
        return
    import ray

    if ray.is_initialized():
        ray.shutdown()
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.stop_global_capturing()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        if stream is not None:
            stream.flush()
    os._exit(int(session.exitstatus))


@pytest.fixture(scope="session")
def jpeg_root(tmp_path_factory) -> str:
    """4 classes x 6 JPEGs of about 500x375 (sizes vary by up to 20%)."""
    root = tmp_path_factory.mktemp("jpegs")
    make_jpeg_folder(str(root), num_classes=4, per_class=6, seed=1)
    return str(root)


@pytest.fixture(scope="session")
def jpeg_files(jpeg_root) -> list[str]:
    """The paths of ``jpeg_root`` in reader order."""
    from raypipe.operators.readers import list_file_root

    return list(list_file_root(jpeg_root)[0])
