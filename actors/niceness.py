"""The scheduling priority (niceness) of raypipe's actor processes.

Ray starts worker processes at niceness 15. A pipeline actor there shares its cores with a
training process at 0 (``torchrun``, ``horovodrun``, a job's driver), and the kernel gives a
runnable nice-0 thread about 28 times the CPU time of a nice-15 one: while the trainer
computes, the actor's decoding threads all but stop. DALI's threads run inside the training
process, at its priority; a raypipe actor runs at the niceness of the process that starts it
(a rank's pipeline actor at its rank's: 0 under ``torchrun``, 15 in a Ray Train worker), or at
the service's ``niceness`` when given.

Two ways there, cheapest first: the actor lowers its own niceness when this process may
(:func:`may_lower_to`: CAP_SYS_NICE or a high enough RLIMIT_NICE), which keeps Ray's ready
worker processes usable; otherwise Ray starts a fresh worker at that niceness
(:func:`runtime_env`), which costs a process start (about 0.3 s here).
"""

from __future__ import annotations

import os
import resource
from typing import Any

from raypipe import log

LOG = log.get(__name__)

RAY_WORKER_NICENESS = 15  # what Ray gives its workers unless told otherwise
_CAP_SYS_NICE = 23


def _has_cap_sys_nice() -> bool:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> _CAP_SYS_NICE & 1)
    except OSError:
        pass
    return False


def may_lower_to(niceness: int) -> bool:
    """True when a process like this one may go from Ray's worker niceness down to ``niceness``."""
    if niceness >= RAY_WORKER_NICENESS:
        return True
    soft, _ = resource.getrlimit(resource.RLIMIT_NICE)
    if soft == resource.RLIM_INFINITY or 20 - soft <= niceness:
        return True
    return _has_cap_sys_nice()


def runtime_env(niceness: int) -> dict[str, Any] | None:
    """The runtime environment an actor at ``niceness`` needs: None when it can set its own
    (:func:`apply`), else Ray's ``RAY_worker_niceness`` for its worker process (as Ray's job
    manager starts its supervisor actors). Ray merges it with the job's runtime environment."""
    if may_lower_to(niceness):
        return None
    return {"env_vars": {"RAY_worker_niceness": str(niceness)}}


def current() -> int:
    """This thread's niceness (on Linux every thread has its own; new threads inherit it)."""
    return os.getpriority(os.PRIO_PROCESS, 0)


def apply(niceness: int, who: str) -> int:
    """Set every thread of this process to ``niceness`` where allowed; returns this thread's
    niceness afterwards, and logs a warning naming ``who`` when the kernel refused."""
    try:
        threads = [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        threads = [0]
    for tid in threads:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, niceness)
        except (PermissionError, ProcessLookupError):
            pass
    got = current()
    if got != niceness:
        LOG.warning("%s runs at niceness %d, not %d as asked: the kernel refused the change", who, got, niceness)
    return got
