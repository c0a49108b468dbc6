"""Speech features: audio seconds per second of an ASR input pipeline, raypipe against DALI's CPU
build in the same run, and the CPU stage's cost per sample.

The pipeline is Jasper's validation path (NVIDIA DeepLearningExamples, as in
``tests/test_porting_speech.py``), every operator on the CPU: ``readers.file`` over 16 kHz WAV and
22.05 kHz FLAC speech-like files of 2-6 s, ``decoders.audio`` to 16 kHz mono (the FLAC files
resampled), ``nonsilent_region`` + ``slice``, ``preemphasis_filter``, ``spectrogram`` (20 ms windows,
10 ms steps, 512-point FFT), ``mel_filter_bank`` (64 bands), ``to_decibels``, ``normalize`` over
time and ``pad`` to a multiple of 16 frames. Each framework runs it with batches of 8 on one thread
(the machine is shared) for ``seconds`` after a warm-up batch; the CPU time is the process's over
the timed batches, per sample: what a CPU helper would take on for a GPU node.

    python benchmarks/domain_speech.py --seconds 10
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import psutil

BATCH = 8
FILES = 24


def make_dataset(root: str) -> tuple[str, float]:
    """Speech-like files in ``root`` and a ``path label`` list of them; their mean duration (s)."""
    import soundfile

    rng = np.random.default_rng(0)
    durations, lines = [], []
    for i in range(FILES):
        rate, ext = (22050, "flac") if i % 3 == 0 else (16000, "wav")
        duration = 2.0 + 4.0 * rng.random()
        t = np.arange(int(rate * duration)) / rate
        voiced = sum(np.sin(2 * np.pi * 150 * h * t) / h for h in range(1, 10))
        envelope = ((t > 0.3) & (t < duration - 0.3)) * 0.5 * (1 - np.cos(2 * np.pi * 4 * t))
        samples = 0.2 * voiced * envelope + 1e-3 * rng.standard_normal(t.size)
        name = f"utt{i}.{ext}"
        soundfile.write(os.path.join(root, name), samples, rate)
        durations.append(duration)
        lines.append(f"{name} {i}\n")
    listing = os.path.join(root, "files.txt")
    with open(listing, "w") as f:
        f.writelines(lines)
    return listing, float(np.mean(durations))


def features(fn, listing: str):
    """The Jasper validation feature graph in ``fn`` (raypipe's or DALI's)."""
    encoded, label = fn.readers.file(file_list=listing, name="Reader")
    audio, _ = fn.decoders.audio(encoded, sample_rate=16000, downmix=True)
    begin, length = fn.nonsilent_region(audio, cutoff_db=-60)
    audio = fn.preemphasis_filter(fn.slice(audio, begin, length, axes=[0]), preemph_coeff=0.97)
    spec = fn.spectrogram(audio, nfft=512, window_length=320, window_step=160)
    mel = fn.mel_filter_bank(spec, sample_rate=16000, nfilter=64, normalize=True)
    logs = fn.to_decibels(mel, multiplier=math.log(10), reference=1.0, cutoff_db=math.log(1e-20))
    return fn.pad(fn.normalize(logs, axes=[1]), axes=[1], fill_value=0, align=16), label


def _time(run: Callable[[], Any], seconds: float) -> tuple[int, float, float]:
    """Batches run in about ``seconds`` after one warm-up batch, their wall time and process CPU time."""
    process = psutil.Process()
    run()
    cpu0, start, batches = process.cpu_times(), time.perf_counter(), 0
    while time.perf_counter() - start < seconds:
        run()
        batches += 1
    wall, cpu1 = time.perf_counter() - start, process.cpu_times()
    return batches, wall, (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)


def _raypipe(listing: str, seconds: float) -> tuple[int, float, float]:
    import raypipe as rp

    @rp.pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=0)
    def pipe():
        return features(rp.fn, listing)

    with pipe() as p:
        p.build()
        return _time(p.run, seconds)


def _dali(listing: str, seconds: float) -> tuple[int, float, float] | None:
    try:
        from nvidia import dali
    except ImportError:
        return None

    @dali.pipeline_def(batch_size=BATCH, num_threads=1, device_id=None, seed=0)
    def pipe():
        return features(dali.fn, listing)

    p = pipe()
    p.build()
    return _time(p.run, seconds)


def measure(seconds: float) -> dict[str, Any]:
    """One timed run of each framework for ``seconds``: audio seconds per second and the ratio."""
    with tempfile.TemporaryDirectory() as root:
        listing, mean_duration = make_dataset(root)
        batches, wall, cpu = _raypipe(listing, seconds)
        theirs = _dali(listing, seconds)
    rate = batches * BATCH * mean_duration / wall
    dali_rate = None if theirs is None else theirs[0] * BATCH * mean_duration / theirs[1]
    return {
        "domain": "speech",
        "unit": "audio s/s",
        "raypipe": rate,
        "dali_cpu": dali_rate,
        "ratio": None if dali_rate is None else rate / dali_rate,
        "cpu_ms_per_sample": 1000 * cpu / (batches * BATCH),
        "dali_cpu_ms_per_sample": None if theirs is None else 1000 * theirs[2] / (theirs[0] * BATCH),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="timed seconds per framework")
    result = measure(parser.parse_args().seconds)

    def cell(value: float | None, digits: int = 1) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    print("| domain | unit | raypipe | DALI CPU | ratio | CPU-stage ms/sample (raypipe) | (DALI) |")
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {result['domain']} | {result['unit']} | {cell(result['raypipe'])} | {cell(result['dali_cpu'])} | "
        f"{cell(result['ratio'], 2)} | {cell(result['cpu_ms_per_sample'])} | {cell(result['dali_cpu_ms_per_sample'])} |"
    )


if __name__ == "__main__":
    main()
