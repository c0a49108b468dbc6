"""Peak memory: this process plus the processes started during a round."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from raypipe.bench.memory import PeakMemory

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/smaps_rollup"), reason="needs Linux /proc")


def test_a_child_started_during_the_round_is_counted():
    child = "import time; data = b'x' * (64 << 20); print(flush=True); time.sleep(0.5)"
    with PeakMemory(interval_s=0.02) as memory:
        process = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE)
        process.stdout.readline()  # the child holds its 64 MiB now
        process.wait()
    assert memory.extra_bytes >= 60 << 20


def test_memory_this_process_held_before_the_round_is_not_counted():
    with PeakMemory(interval_s=0.02) as memory:
        pass
    assert 0 <= memory.extra_bytes < 16 << 20


def test_a_process_whose_rss_stays_put_is_not_walked_again(monkeypatch):
    from raypipe.bench import memory

    walks = []
    real = memory._pss
    monkeypatch.setattr(memory, "_pss", lambda pid: walks.append(pid) or real(pid))
    with PeakMemory(interval_s=0.01) as probe:
        time.sleep(0.2)  # about 20 samples of a process whose RSS stays put
        quiet = len(walks)
        grown = b"x" * (64 << 20)  # the RSS moves by far more than the slack: read again
        probe.sample()
    assert quiet == 2, "the PSS at the start and at the first sample; then the RSS counter only"
    assert len(walks) > quiet and probe.extra_bytes >= 60 << 20
    del grown
