"""Where each thread of a profiled run spent its samples: a summary of a py-spy raw profile.

    py-spy record --idle --threads --native --format raw -o profile.txt -- python examples/bench_gpu.py ...
    python benchmarks/profile_summary.py profile.txt [--top 8]

For each thread (py-spy's ``--threads`` root frame, by name), the share of the run's samples it
took, the share of its samples spent waiting (its innermost native frame a wait: for the GIL, a
lock, a condition or a futex among the native calls under its innermost Python frame; ``--idle``
keeps those samples), and the Python functions its samples
were in (the innermost Python frame), most first. Where the GPU path's Mixed stage spends its time
waiting inside nvImageCodec calls, this shows it.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field

#: Native frames that mean "waiting": the GIL (CPython's take_gil through a condition variable),
#: locks, conditions and futexes.
WAITS = ("take_gil", "PyCOND_TIMEDWAIT", "pthread_cond_timedwait", "pthread_cond_wait", "sem_wait", "sem_timedwait")
WAITS += ("futex", "__lll_lock_wait", "PyEval_RestoreThread", "PyEval_AcquireThread", "epoll_wait", "poll")
_PYTHON_FRAME = re.compile(r"^(?P<function>.+) \((?P<file>[^():]+\.py):\d+\)$")
_THREAD = re.compile(r"^thread \(\d+\): (?P<name>.*)$")


@dataclass
class ThreadProfile:
    """One thread's samples: in all, waiting, and per innermost Python function."""

    samples: int = 0
    waiting: int = 0
    functions: Counter = field(default_factory=Counter)


def parse(lines) -> dict[str, ThreadProfile]:
    """Each thread's :class:`ThreadProfile` from py-spy's raw lines (``frame;frame;... count``),
    threads of one name merged (a pool's threads share theirs)."""
    threads: dict[str, ThreadProfile] = defaultdict(ThreadProfile)
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        root = _THREAD.match(frames[0])
        name = root.group("name") if root else "(all threads)"
        frames = frames[1:] if root else frames
        profile = threads[_family(name)]
        samples = int(count)
        profile.samples += samples
        python = [k for k, f in enumerate(frames) if _PYTHON_FRAME.match(f)]
        below = frames[python[-1] + 1 :] if python else frames  # the native calls under the innermost
        if any(w in f for f in below for w in WAITS):
            profile.waiting += samples
        python = [frames[k] for k in python]
        profile.functions[_short(python[-1]) if python else "(no Python frame)"] += samples
    return dict(threads)


def _family(name: str) -> str:
    """A thread's name less a pool's numbering (``raypipe-cpu_3`` -> ``raypipe-cpu_*``)."""
    return re.sub(r"\d+$", "*", name) if re.search(r"[_-]\d+$", name) else name


def _short(frame: str) -> str:
    match = _PYTHON_FRAME.match(frame)
    return f"{match.group('function')} ({match.group('file').rsplit('/', 1)[-1]})"


def report(threads: dict[str, ThreadProfile], top: int) -> str:
    """The summary as text: threads by samples, each with its waiting share and top functions."""
    total = sum(t.samples for t in threads.values()) or 1
    lines = [f"{'thread':<40}{'samples':>9}{'of all':>8}{'waiting':>9}"]
    for name, thread in sorted(threads.items(), key=lambda item: -item[1].samples):
        waiting = thread.waiting / thread.samples if thread.samples else 0.0
        lines.append(f"{name:<40}{thread.samples:>9}{thread.samples / total:>8.1%}{waiting:>9.1%}")
        for function, samples in thread.functions.most_common(top):
            lines.append(f"    {samples / thread.samples:>6.1%}  {function}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", help="py-spy's raw output (--format raw)")
    parser.add_argument("--top", type=int, default=8, help="Python functions shown per thread")
    args = parser.parse_args(argv)
    if args.top < 1:
        parser.error("--top must be positive")
    try:
        with open(args.profile, encoding="utf-8") as f:
            threads = parse(f)
    except OSError as exc:
        parser.error(f"cannot read {args.profile}: {exc.strerror}")
    if not threads:
        print(f"{args.profile}: no samples (not py-spy's raw format?)")
        return 1
    print(report(threads, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
