"""The contenders: one function per way of running the ResNet-50 training recipe, each an
endless stream of batches over the round's files (epoch after epoch), timed by
:func:`time_batches`: time to the first batch, start-up included; then ``warmup`` batches
untimed, so that every contender is measured in its steady state, as a training job sees
it; then images/s over whole epochs' worth of batches until ``seconds`` have passed (a window
of one epoch, under a second, mostly measured how fast a contender settled after start-up).

Every contender makes the same thing, a random-area crop resized to 224x224, mirrored at
random, normalized, CHW float32 (raypipe's in-process uint8 rows stop before normalizing; the
service's uint8 row normalizes on the rank), except the decode-only bound, which decodes the
full images and nothing else.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from raypipe import types
from raypipe.backend import gpu_available
from raypipe.presets import resnet50_train

from .dali_recipe import dali_pipeline, dali_unavailable
from .reference import SIZE, decode_pillow, decode_turbo, reference_sample, turbo_unavailable


@dataclasses.dataclass(frozen=True)
class Workload:
    """What a contender reads in one round: ``root``'s files (``paths``, reader order), timed over
    whole epochs of ``len(paths) // batch_size`` batches, after the first and ``warmup`` more,
    until at least ``seconds`` have passed, on ``threads`` threads or workers. ``round`` (from 0)
    seeds the round's shuffle and crops."""

    root: str
    paths: list[str]
    batch_size: int
    threads: int
    round: int
    warmup: int = 0
    seconds: float = 0.0

    @property
    def batches(self) -> int:
        """Full batches in one epoch of the files."""
        return len(self.paths) // self.batch_size


@dataclasses.dataclass(frozen=True)
class Timing:
    """One round of one contender: seconds to its first batch, then images and images/s after it."""

    first_batch_s: float
    images: int
    images_per_s: float


@dataclasses.dataclass(frozen=True)
class Contender:
    """A row of the table: ``name`` selects it (``--only``/``--skip``), ``run`` times one round.
    ``unavailable`` says why it cannot run here (None: it can). ``reference`` marks the
    other loaders ratios may be taken to; ``ranks`` the logical GPUs a service row needs."""

    name: str
    label: str
    run: Callable[[Workload], Timing]
    unavailable: Callable[[], str | None] = lambda: None
    uses_ray: bool = False
    ranks: int = 0
    reference: bool = False


def time_batches(batches: Iterable[int], warmup: int, per_epoch: int, seconds: float = 0.0) -> Timing:
    """Time an endless iterable of batch sizes that does its start-up on the first ``next``: the
    first batch, ``warmup`` batches untimed, then epochs of ``per_epoch`` batches, timed, until
    ``seconds`` have passed (at least one epoch); the iterable is closed after (its pipeline or
    workers stop)."""
    it = iter(batches)
    try:
        start = time.perf_counter()
        next(it)
        first = time.perf_counter()
        for _ in range(warmup):
            next(it)
        began = time.perf_counter()
        images, elapsed = 0, 0.0
        while images == 0 or elapsed < seconds:
            images += sum(next(it) for _ in range(per_epoch))
            elapsed = time.perf_counter() - began
        return Timing(first - start, images, images / elapsed)
    finally:
        close = getattr(it, "close", None)
        if close is not None:
            close()


def check_batch(what: str, batch: Any, dtype: str, shape: tuple[int, ...]) -> None:
    """Raise unless ``batch`` (numpy, cupy or torch) has ``dtype`` and ``shape``: a contender
    that makes the wrong thing must not be timed."""
    got = str(batch.dtype).removeprefix("torch.")
    if got != dtype or tuple(batch.shape) != shape:
        raise RuntimeError(f"{what}: expected {dtype} batches of shape {shape}, got {got} {tuple(batch.shape)}")


def _raypipe(work: Workload, decoder_device: str, dtype: types.DALIDataType) -> Iterator[int]:
    """``presets.resnet50_train`` in this process; a mixed decoder on GPU 0 where one is usable."""
    device_id = 0 if decoder_device == "mixed" and gpu_available() else None
    expected = "float32" if dtype is types.FLOAT else "uint8"
    with resnet50_train(
        work.root,
        batch_size=work.batch_size,
        num_threads=work.threads,
        decoder_device=decoder_device,
        dtype=dtype,
        device_id=device_id,
        seed=work.round,
    ) as pipe:
        for k in itertools.count():
            images, _ = pipe.run()
            batch = images.dense_array()
            if k == 0:
                check_batch(f"raypipe {decoder_device}", batch, expected, (work.batch_size, 3, SIZE, SIZE))
            yield len(batch)


class RecipeDataset:
    """A map-style torch Dataset (no torch import needed): the recipe in Pillow + numpy."""

    def __init__(self, paths: list[str], seed: int):
        self.paths = paths
        self.seed = seed

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> np.ndarray:
        return reference_sample(self.paths[index], np.random.default_rng((self.seed, index)))


def _torch(work: Workload) -> Iterator[int]:
    """A torch DataLoader with ``threads`` persistent worker processes (forkserver: a driver
    running Ray threads is not safe to fork), shuffled, full batches, epoch after epoch."""
    import torch

    loader = torch.utils.data.DataLoader(
        RecipeDataset(work.paths, work.round),
        batch_size=work.batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=work.threads,
        multiprocessing_context="forkserver",
        persistent_workers=True,
    )
    for k, images in enumerate(itertools.chain.from_iterable(iter(loader) for _ in itertools.count())):
        if k == 0:
            check_batch("torch DataLoader", images, "float32", (work.batch_size, 3, SIZE, SIZE))
        yield len(images)


def _torch_unavailable() -> str | None:
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        return f"torch cannot be imported ({exc}); pip install torch"
    return None


def recipe_batch(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Ray Data ``map_batches`` function: JPEG bytes in, a float32 N x 3 x 224 x 224 batch out."""
    rng = np.random.default_rng()
    return {"image": np.stack([reference_sample(data, rng) for data in batch["bytes"]])}


def _ray_data(work: Workload) -> Iterator[int]:
    """``read_binary_files`` + ``map_batches`` (``threads`` tasks at once) + ``iter_batches``."""
    import ray.data

    logging.getLogger("ray.data").setLevel(logging.ERROR)  # no per-dataset INFO lines under the table
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    context.enable_auto_log_stats = False
    dataset = ray.data.read_binary_files(work.paths, shuffle="files").map_batches(
        recipe_batch, batch_size=work.batch_size, batch_format="numpy", concurrency=work.threads
    )
    epochs = (
        dataset.iter_batches(batch_size=work.batch_size, batch_format="numpy", drop_last=True)
        for _ in itertools.count()
    )
    for k, batch in enumerate(itertools.chain.from_iterable(epochs)):
        if k == 0:
            check_batch("Ray Data", batch["image"], "float32", (work.batch_size, 3, SIZE, SIZE))
        yield len(batch["image"])


def _dali(work: Workload) -> Iterator[int]:
    """DALI's CPU pipeline in this process."""
    pipe = dali_pipeline(work.root, work.batch_size, work.threads, seed=work.round)
    for k in itertools.count():
        images, _ = pipe.run()
        batch = images.as_tensor()
        if k == 0:
            check_batch("DALI", np.asarray(batch), "float32", (work.batch_size, 3, SIZE, SIZE))
        yield batch.shape()[0]


def _decode(work: Workload, decode: Callable[[str], np.ndarray]) -> Iterator[int]:
    """The bound: ``threads`` threads decoding whole images, a batch at a time."""
    with ThreadPoolExecutor(work.threads) as pool:
        for k in itertools.count():
            first = (k % work.batches) * work.batch_size
            chunk = work.paths[first : first + work.batch_size]
            yield len(list(pool.map(decode, chunk)))


def contenders(threads: int) -> list[Contender]:
    """Every contender, in table order, labelled for ``threads`` threads (or workers) each."""
    from .service import service_round

    def timed(batches: Callable[..., Iterable[int]], *args: Any) -> Callable[[Workload], Timing]:
        return lambda work: time_batches(batches(work, *args), work.warmup, work.batches, work.seconds)

    def service(name: str, label: str, ranks: int, uint8: bool) -> Contender:
        run = lambda work: service_round(work, ranks=ranks, uint8=uint8)  # noqa: E731
        return Contender(name, label, run, _torch_unavailable, uses_ray=True, ranks=ranks)

    mixed = "GPU 0" if gpu_available() else "host fallback"
    return [
        Contender("dali-cpu", f"DALI CPU pipeline, {threads} threads", timed(_dali), dali_unavailable, reference=True),
        Contender("raypipe-cpu-f32", "raypipe cpu, float32", timed(_raypipe, "cpu", types.FLOAT)),
        Contender("raypipe-cpu-u8", "raypipe cpu, uint8 (not normalized)", timed(_raypipe, "cpu", types.UINT8)),
        Contender("raypipe-mixed-f32", f"raypipe mixed ({mixed}), float32", timed(_raypipe, "mixed", types.FLOAT)),
        Contender(
            "raypipe-mixed-u8",
            f"raypipe mixed ({mixed}), uint8 (not normalized)",
            timed(_raypipe, "mixed", types.UINT8),
        ),
        service("service-1rank", "raypipe service, 1 rank, float32", ranks=1, uint8=False),
        service("service-1rank-u8", "raypipe service, 1 rank, uint8 + rank normalize", ranks=1, uint8=True),
        service("service-2ranks", "raypipe service, 2 ranks (sum), float32", ranks=2, uint8=False),
        Contender("torch", f"torch DataLoader, {threads} workers", timed(_torch), _torch_unavailable, reference=True),
        Contender("ray-data", f"Ray Data, {threads} CPUs", timed(_ray_data), uses_ray=True, reference=True),
        Contender("decode-pillow", f"decode only: Pillow, {threads} threads", timed(_decode, decode_pillow)),
        Contender(
            "decode-turbo",
            f"decode only: jpeg_turbo, {threads} threads",
            timed(_decode, decode_turbo),
            turbo_unavailable,
        ),
    ]
