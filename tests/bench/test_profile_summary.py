"""benchmarks/profile_summary.py on a real py-spy raw profile (``py-spy record --idle --threads
--native --format raw`` of three threads: two busy in Python, one calling into C; 2 cores): each
thread's samples, its waiting share and its Python functions; a pool's threads merged; bad input."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROFILE = Path(__file__).parent / "data" / "pyspy_raw.txt"


@pytest.fixture(scope="module")
def summary():
    spec = importlib.util.spec_from_file_location("profile_summary", ROOT / "benchmarks" / "profile_summary.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_every_sample_is_counted_once_under_its_thread(summary):
    threads = summary.parse(PROFILE.read_text().splitlines())
    total = sum(int(line.rpartition(" ")[2]) for line in PROFILE.read_text().splitlines() if line.strip())
    assert set(threads) == {"MainThread", "raypipe-cpu-stage", "raypipe-mixed"}
    assert sum(t.samples for t in threads.values()) == total
    for thread in threads.values():
        assert sum(thread.functions.values()) == thread.samples and 0 <= thread.waiting <= thread.samples


def test_the_thread_in_c_calls_waits_most_and_its_functions_are_named(summary):
    threads = summary.parse(PROFILE.read_text().splitlines())
    mixed, busy = threads["raypipe-mixed"], threads["raypipe-cpu-stage"]
    assert mixed.waiting / mixed.samples > busy.waiting / busy.samples
    assert busy.functions.most_common(1)[0][0] == "busy (work.py)"
    assert "io_ish (work.py)" in mixed.functions


def test_a_pool_s_threads_are_one_row(summary):
    lines = [
        "thread (1): raypipe-cpu_0;run (a.py:1);work (a.py:2);pthread_cond_timedwait (libc.so.6) 3",
        "thread (2): raypipe-cpu_1;run (a.py:1);work (a.py:2) 5",
        "thread (3): raypipe-mixed;step (b.py:9) 2",
    ]
    threads = summary.parse(lines)
    assert set(threads) == {"raypipe-cpu_*", "raypipe-mixed"}
    assert (threads["raypipe-cpu_*"].samples, threads["raypipe-cpu_*"].waiting) == (8, 3)
    text = summary.report(threads, top=1)
    assert text.splitlines()[1].split()[:2] == ["raypipe-cpu_*", "8"] and "100.0%  work (a.py)" in text


def test_the_command_prints_the_table_and_refuses_what_it_cannot_read(summary, capsys, tmp_path):
    assert summary.main([str(PROFILE), "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["thread", "samples", "of", "all", "waiting"]
    (tmp_path / "empty.txt").write_text("not a profile\n")
    assert summary.main([str(tmp_path / "empty.txt")]) == 1
    assert "no samples" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        summary.main([str(tmp_path / "missing.txt")])
    with pytest.raises(SystemExit):
        summary.main([str(PROFILE), "--top", "0"])
