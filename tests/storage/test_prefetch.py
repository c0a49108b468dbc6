"""Fetch-ahead: announced keys are fetched before they are read, within the bounds on requests
in flight and bytes held; stale announcements are dropped; failures reach the reader."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from raypipe.storage.failures import MissingObjectError
from raypipe.storage.prefetch import Prefetcher


class SlowSource:
    """A fetch of ``delay_s`` per key that counts how many run at once."""

    def __init__(self, delay_s: float = 0.02, size: int = 100):
        self.delay_s, self.size = delay_s, size
        self.running = self.most = self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, key: int) -> np.ndarray:
        with self._lock:
            self.running += 1
            self.calls += 1
            self.most = max(self.most, self.running)
        time.sleep(self.delay_s)
        with self._lock:
            self.running -= 1
        if key < 0:
            raise MissingObjectError(f"s3://b/{key}: no such object")
        return np.full(self.size, key % 256, np.uint8)


def test_announced_keys_are_fetched_many_at_once_and_read_once():
    source = SlowSource()
    fetcher = Prefetcher(source, max_in_flight=16)
    began = time.monotonic()
    fetcher.want(range(64))
    got = [fetcher.take(k) for k in range(64)]
    assert time.monotonic() - began < 64 * source.delay_s / 3
    assert [int(g[0]) for g in got] == list(range(64)) and source.calls == 64
    assert source.most == 16 and fetcher.stats["prefetch_hits"] == 64 and fetcher.stats["direct_fetches"] == 0
    assert fetcher.in_flight()["bytes_held"] == 0 and fetcher.in_flight()["in_flight_peak"] == 16
    fetcher.close()


def test_bytes_held_stay_within_the_bound():
    source = SlowSource(delay_s=0.001, size=1000)
    fetcher = Prefetcher(source, max_in_flight=8, max_bytes=4000)
    fetcher.want(range(32), [1000] * 32)
    time.sleep(0.2)
    assert source.calls == 4 and fetcher.in_flight()["bytes_held"] == 4000
    for k in range(32):
        assert int(fetcher.take(k)[0]) == k
    assert fetcher.peak["bytes_held_peak"] <= 4000 and source.calls == 32
    fetcher.close()


def test_unannounced_keys_are_fetched_on_demand_and_stale_ones_dropped():
    source = SlowSource(delay_s=0.001)
    fetcher = Prefetcher(source, max_in_flight=4, stale_after=10)
    assert int(fetcher.take(7)[0]) == 7 and fetcher.stats["direct_fetches"] == 1
    fetcher.want(range(5))
    time.sleep(0.1)
    fetcher.want(range(100, 120))  # the first five were never read: a re-seek
    assert fetcher.stats["prefetch_dropped"] == 5
    fetcher.close()


def test_a_failed_fetch_raises_where_it_is_read():
    fetcher = Prefetcher(SlowSource(delay_s=0.001), max_in_flight=2)
    fetcher.want([1, -1, 2])
    with pytest.raises(MissingObjectError, match="no such object"):
        fetcher.take(-1)
    assert int(fetcher.take(2)[0]) == 2
    fetcher.close()


def test_a_key_announced_again_before_it_is_read_is_fetched_again():
    """A dataset smaller than the look-ahead: epoch 2's announcement comes before epoch 1's read."""
    source = SlowSource(delay_s=0.001)
    fetcher = Prefetcher(source, max_in_flight=4)
    fetcher.want(range(8))
    fetcher.want(range(8))
    for _ in range(2):
        assert [int(fetcher.take(k)[0]) for k in range(8)] == list(range(8))
    assert fetcher.stats["direct_fetches"] == 0 and fetcher.stats["prefetch_hits"] == 16 and source.calls == 16
    fetcher.close()
