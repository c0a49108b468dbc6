"""The actors' scheduling priority: :mod:`actors.niceness` in child processes (never this one),
with and without the right to lower a niceness (``tests/cluster/test_placement.py`` checks that Ray
honours :func:`actors.niceness.runtime_env`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from actors import niceness

_CHILD = """
import os
os.nice(10)  # start where Ray puts its workers, above the target, before any import starts threads
import json, logging, threading
from actors import niceness
logging.basicConfig(level=logging.WARNING)
started = threading.Event()
worker = threading.Thread(target=started.wait, daemon=True)
worker.start()  # a thread from before, as Ray's own threads are
got = niceness.apply({target}, "a test actor")
print(json.dumps({{
    "got": got,
    "threads": sorted({{os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir("/proc/self/task")}}),
    "may_lower": niceness.may_lower_to({target}),
    "env": niceness.runtime_env({target}),
}}))
started.set()
"""


def _child(target: int, drop_cap_sys_nice: bool) -> tuple[dict, str]:
    command = [sys.executable, "-c", _CHILD.format(target=target)]
    if drop_cap_sys_nice:
        command = ["setpriv", "--bounding-set=-sys_nice", *command]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, check=True)
    return json.loads(done.stdout), done.stderr


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="per-thread niceness is Linux's")
def test_apply_moves_every_thread_where_the_process_may():
    if not niceness.may_lower_to(0):
        pytest.skip("this process may not lower a niceness (no CAP_SYS_NICE, RLIMIT_NICE 0)")
    result, stderr = _child(2, drop_cap_sys_nice=False)
    assert result["got"] == 2 and result["threads"] == [2], "every thread, the one started before too"
    assert result["may_lower"] is True and result["env"] is None, "no fresh worker process needed"
    assert "niceness" not in stderr


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="per-thread niceness is Linux's")
def test_where_the_kernel_refuses_apply_warns_and_ray_is_asked_instead():
    drop = niceness._has_cap_sys_nice()
    if drop and (os.geteuid() != 0 or shutil.which("setpriv") is None):
        pytest.skip("cannot run a child without CAP_SYS_NICE here")
    result, stderr = _child(0, drop_cap_sys_nice=drop)
    if result["may_lower"]:
        pytest.skip("RLIMIT_NICE lets this machine's processes lower their niceness")
    assert result["got"] == 10 and result["threads"] == [10], "unchanged: the kernel refused"
    assert "a test actor runs at niceness 10, not 0 as asked" in stderr
    assert result["env"] == {"env_vars": {"RAY_worker_niceness": "0"}}


def test_raising_a_niceness_needs_no_right():
    assert niceness.may_lower_to(niceness.RAY_WORKER_NICENESS) and niceness.may_lower_to(19)
    assert niceness.runtime_env(19) is None
