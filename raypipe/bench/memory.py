"""Peak memory of a contender's round, sampled in a background thread.

:class:`PeakMemory` sums the PSS (proportional set size: shared pages split between the
processes sharing them, so forked workers are not counted twice) of this process and of the
descendants that work for the contender: those started during the round (DataLoader workers,
pipeline actors) and those whose title changes during it (a Ray worker that goes from
``ray::IDLE`` to running a task), but not idle Ray workers. Linux only (``/proc``); elsewhere it measures nothing.
:class:`StorePeak` polls the Ray object store's bytes in use and spilled, once a second: each
poll makes every Ray worker report its stats to the raylet (``FormatGlobalMemoryInfo``), which
at ten polls a second cost about 6 % of a core and slowed the service rows it watched by 5-10 %.
"""

from __future__ import annotations

import os
import threading

IDLE = b"ray::IDLE"  # the title of a Ray worker process waiting for work
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
#: A process's PSS is read again only when its RSS moved by more than this many bytes since the
#: last read: a PSS read walks its page tables, an RSS read is a counter.
RSS_SLACK = 4 << 20


def _pss(pid: int) -> int | None:
    """``pid``'s PSS in bytes, or None when it cannot be read (gone, or no /proc)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def _rss(pid: int) -> int | None:
    """``pid``'s resident set size in bytes from ``/proc/PID/statm`` (kernel counters: cheap), or None."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return None


def _descendants(root: int) -> dict[int, bytes]:
    """Every descendant of ``root`` with its title (first word of its command line, which Ray
    workers set to ``ray::IDLE``, ``ray::<actor class>``, ``ray::<task>``)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found: dict[int, bytes] = {}
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                found[pid] = f.read().split(b"\0", 1)[0]
        except OSError:
            continue
        stack.extend(children.get(pid, []))
    return found


class _Poller:
    """Calls ``sample`` every ``interval_s`` in a daemon thread between ``__enter__`` and ``__exit__``."""

    def __init__(self, interval_s: float):
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self._interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


class PeakMemory(_Poller):
    """Peak PSS of this process plus the descendants working for the contender, above this
    process's PSS when the round starts (``extra_bytes``; None where /proc cannot tell).

    Sampled once a second and at the end. The kernel computes a PSS by walking the process's
    page tables under its memory-map lock, about 12 ms for a pipeline actor with its batch
    segments mapped (five samples a second slowed the service rows by about 12 %), so a process
    whose RSS has not moved by :data:`RSS_SLACK` since its last PSS read keeps that PSS: in a
    steady state the probe reads counters only."""

    def __init__(self, interval_s: float = 1.0):
        super().__init__(interval_s)
        self._pid = os.getpid()
        self._base = _pss(self._pid)
        self._before = _descendants(self._pid) if self._base is not None else {}
        self._known: dict[int, tuple[int, int]] = {}  # pid -> (RSS, PSS) at its last PSS read
        self.peak = self._base

    def sample(self) -> None:
        if self._base is None:
            return
        working = [
            pid for pid, title in _descendants(self._pid).items() if title != IDLE and self._before.get(pid) != title
        ]
        total = sum(self._pss(pid) or 0 for pid in [self._pid, *working])
        self.peak = max(self.peak, total)

    def _pss(self, pid: int) -> int | None:
        rss = _rss(pid)
        known = self._known.get(pid)
        if rss is not None and known is not None and abs(rss - known[0]) <= RSS_SLACK:
            return known[1]
        pss = _pss(pid)
        if rss is not None and pss is not None:
            self._known[pid] = (rss, pss)
        return pss

    @property
    def extra_bytes(self) -> int | None:
        return None if self._base is None else max(0, self.peak - self._base)


class StorePeak(_Poller):
    """Peak bytes in use in the Ray object store (the largest of samples ``interval_s`` apart), and
    bytes Ray spilled to disk meanwhile (``spilled``, exact: Ray's own counter;
    :func:`cluster.object_store.usage`)."""

    def __init__(self, interval_s: float = 1.0):
        from cluster import object_store

        super().__init__(interval_s)
        self._usage = object_store.usage
        self._spilled_before = self._usage().spilled_bytes
        self.peak = 0
        self.spilled = 0

    def sample(self) -> None:
        usage = self._usage()
        self.peak = max(self.peak, usage.used_bytes)
        self.spilled = usage.spilled_bytes - self._spilled_before
