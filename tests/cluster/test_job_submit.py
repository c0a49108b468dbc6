"""The README's cluster commands, for real: ``ray start --head --num-gpus=2`` on this machine,
then ``ray job submit`` of the DDP and the Horovod examples with their default arguments
(one head for both), ``raypipe stats`` and ``raypipe doctor`` from another process while a job
trains, and a job asking for more than the cluster has fails fast, naming it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import IO

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)

pytestmark = pytest.mark.slow
GCS: dict[str, str] = {}  # a head's job-server address -> its GCS address (what drivers connect to)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_head(log: IO[str]) -> tuple[subprocess.Popen, str] | None:
    """``ray start --head`` on free ports, writing to ``log``: the process and the job server's
    address once it answers, or None when it exited first (another process took a port between
    :func:`_free_port` and Ray binding it)."""
    port, dashboard = _free_port(), _free_port()
    # stopped at the module's end with nothing left to drain: no 30 s drain on SIGTERM; the jobs'
    # ``python`` is this interpreter, also when its virtual environment is not activated; Ray Train
    # in the jobs polls its workers every 0.5 s (2 s by default), noticing a rank's death and the
    # end of a group sooner
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {
        "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
        "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.5",
        "PATH": os.pathsep.join([BIN, os.environ.get("PATH", "")]),
    }
    proc = subprocess.Popen(
        [
            os.path.join(BIN, "ray"),
            "start",
            "--head",
            "--block",
            "--num-cpus=2",
            "--num-gpus=2",
            f"--port={port}",
            f"--dashboard-port={dashboard}",
            # ports of its own, so that it also starts beside the session's simulated cluster
            f"--dashboard-agent-listen-port={_free_port()}",
            f"--dashboard-agent-grpc-port={_free_port()}",
            f"--runtime-env-agent-port={_free_port()}",
            f"--metrics-export-port={_free_port()}",
            "--include-dashboard=true",
            "--disable-usage-stats",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    address = f"http://127.0.0.1:{dashboard}"
    GCS[address] = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while _ray_job(address, "list", timeout=60).returncode != 0:
        if proc.poll() is not None:
            return None
        if time.monotonic() > deadline:
            _stop(proc)
            return None
        time.sleep(2)
    return proc, address


def _stop(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    """A ``ray start --head`` of its own (2 CPUs, 2 logical GPUs), in its own process group so
    that stopping it touches no other Ray instance of the test session; up to 3 tries."""
    log_path = tmp_path_factory.mktemp("ray-head") / "ray-start.log"
    with open(log_path, "w") as log:
        for _ in range(3):
            started = _start_head(log)
            if started is not None:
                break
        else:
            raise AssertionError(f"ray start --head did not come up in 3 tries:\n{log_path.read_text()[-3000:]}")
    proc, address = started
    try:
        yield address
    finally:
        _stop(proc)


def _ray_job(address: str, *args: str, timeout: float = 400) -> subprocess.CompletedProcess:
    """``ray job <args>`` against the head's job server, with the token Ray's auth needs."""
    return subprocess.run(
        [os.path.join(BIN, "ray"), "job", *args[:1], "--address", address, *args[1:]],
        cwd=ROOT,
        env={**os.environ, "RAY_AUTH_MODE": "token"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _submit(address: str, command: list[str], timeout: float = 400, wait: bool = True) -> subprocess.CompletedProcess:
    """Submit ``command`` and wait for it (or only for its submission); the head's job agent may
    answer a while after its job server does (a minute and more on a busy machine), so a
    submission it refuses as not ready is tried again (for up to 180 s)."""
    deadline = time.monotonic() + 180
    flags = [] if wait else ["--no-wait"]
    while True:
        proc = _ray_job(address, "submit", *flags, "--working-dir", ".", "--", *command, timeout=timeout)
        if "No available agent to submit job" not in proc.stderr or time.monotonic() > deadline:
            return proc
        time.sleep(2)


def test_ddp_example_submitted_as_a_job_survives_a_rank_killing_itself_and_resumes_from_its_checkpoint(head):
    """The README's main job as a user submits it, with a rank's death on the way: every step of a
    job without one, then the restart (one job covers both, the slowest tests being these)."""
    proc = _submit(head, ["python", "examples/train_ddp.py", "--fail-at", "6"])
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "rank 1 kills its own process at step 6 (--fail-at)" in out
    assert re.search(r"resumed from the checkpoint of step 4 in epoch 0; first batch [0-9.]+ s after the rank", out)
    # the restarted group finishes epoch 0 from step 4 (its last batch) and trains epoch 1 whole
    assert re.search(r"epoch 0, rank 0, batches \d+, images 16,", out), out[-4000:]
    for rank in (0, 1):
        assert re.search(rf"epoch 1, rank {rank}, batches 5, images 80", out), out[-4000:]
    assert "training finished: ok" in out
    assert "Token authentication" not in out and "TrainController" not in out, "Ray's logs stay out of the output"


def test_horovod_example_submitted_as_a_job_trains_and_ends(head):
    pytest.importorskip("horovod.torch", reason="install with: bash cluster/install_horovod.sh")
    horovodrun = shutil.which("horovodrun", path=BIN) or "horovodrun"
    args = [horovodrun, "-np", "2", "-H", "localhost:2", "--gloo", sys.executable, "examples/train_horovod.py"]
    proc = _submit(head, args)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert out.count("replicas_in_sync=True") == 2, out[-4000:]
    assert "epoch=1 steps=5 len=5" in out
    # horovodrun processes see both GPUs of the node; each rank's actor takes its local rank's
    assert "pipeline_actor_gpus=['0', '1']" in out, out[-4000:]


def test_a_job_asking_for_more_than_the_cluster_has_fails_fast_naming_it(head):
    # the subprocess timeout is the bound: a job that waited for resources would raise TimeoutExpired
    proc = _submit(head, ["python", "examples/train_ddp.py", "--workers", "3"], timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "Ray Train workers: 3 x {'CPU': 1.0} need CPU 3; the Ray cluster has CPU 2 in all" in out, out[-3000:]


def _raypipe(head: str, *args: str) -> subprocess.CompletedProcess:
    """The ``raypipe`` console script run as a user would, against the head's cluster."""
    env = {**os.environ, "RAY_ADDRESS": GCS[head], "RAY_AUTH_MODE": "token"}
    return subprocess.run(
        [os.path.join(BIN, "raypipe"), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_stats_and_doctor_watch_a_job_while_it_trains(head):
    submitted = _submit(head, ["python", "examples/train_ddp.py", "--epochs", "150"], wait=False)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    job = re.search(r"raysubmit_\w+", submitted.stdout + submitted.stderr).group(0)
    deadline, stats = time.monotonic() + 240, None
    while time.monotonic() < deadline:
        proc = _raypipe(head, "stats", "ddp-demo", "--count", "1", "--json")
        if proc.returncode == 0:
            stats = json.loads(proc.stdout)
            ranks = stats["ranks"]
            if len(ranks) == 2 and all(r["batches"] >= 3 for r in ranks.values()):
                break
        else:  # no service (yet): a job that has already ended fails the test at once, with its logs
            status = _ray_job(head, "status", job, timeout=120)  # its last logs when it has ended
            said = status.stdout + status.stderr
            assert not re.search(rf"Job '{job}' (failed|succeeded|was stopped)", said), said[-4000:]
        time.sleep(1)
    assert stats is not None and len(stats["ranks"]) == 2, stats
    assert all(a["available"] and a["stages"]["rows"] for a in stats["actors"]), stats["actors"]
    table = _raypipe(head, "stats", "ddp-demo", "--count", "1")
    assert table.returncode == 0 and "stall %" in table.stdout and "'Reader'" in table.stdout, table.stdout
    doctor = _raypipe(head, "doctor", "ddp-demo", "--json")
    assert doctor.returncode == 0, doctor.stderr
    report = json.loads(doctor.stdout)
    assert report["verdict"] in ("input-bound", "not input-bound") and report["evidence"], report
    stop = _ray_job(head, "stop", job, timeout=120)  # waits until the job has exited
    assert stop.returncode == 0 and "was stopped" in stop.stdout + stop.stderr, stop.stdout + stop.stderr
    deadline = time.monotonic() + 60
    while _raypipe(head, "stats", "ddp-demo", "--count", "1", "--json").returncode == 0:
        assert time.monotonic() < deadline, "the service outlived its stopped job"
        time.sleep(1)
