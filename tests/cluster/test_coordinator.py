"""The coordinator actor's own process: how it tells a first start from a restart by Ray."""

from __future__ import annotations

import os
import signal
import time
import warnings

import ray
from ray.exceptions import RayActorError

from cluster.coordinator import restarted_by_ray


@ray.remote(max_restarts=1, num_cpus=0)
class _Probe:
    def restarted(self) -> tuple[int, bool, list[str]]:
        """Its pid and ``restarted_by_ray()`` here, with every warning that raised."""
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            restarted = restarted_by_ray()
        return os.getpid(), restarted, [f"{w.category.__name__}: {w.message}" for w in seen]


def _after_restart(probe, dead_pid: int) -> tuple[int, bool, list[str]]:
    """The probe's answer once a process other than ``dead_pid`` gives it (Ray restarts it)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            answer = ray.get(probe.restarted.remote(), timeout=10)
            if answer[0] != dead_pid:
                return answer
        except RayActorError:  # between the death and the restart
            pass
        assert time.monotonic() < deadline, "Ray did not restart the actor within 60 s"
        time.sleep(0.2)


def test_an_actor_restarted_by_ray_knows_it_and_no_deprecation_warning_is_raised(cluster):
    probe = _Probe.remote()
    try:
        pid, restarted, warned = ray.get(probe.restarted.remote())
        assert (restarted, warned) == (False, [])
        os.kill(pid, signal.SIGKILL)  # the simulated nodes share this machine
        assert _after_restart(probe, pid)[1:] == (True, [])
    finally:
        ray.kill(probe)
