"""A speech pipeline through ``rp.serve`` with 2 ranks: NeMo-manifest audio of different lengths
and its log mel spectrograms reach the ranks as per-sample arrays (ragged), or padded with their
shapes; each file exactly once per epoch, equal batch counts on the ranks, lengths intact."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import raypipe as rp
from tests.audio_data import speech_like, write
from tests.cluster.pipelines import speech_features

WORLD = 2
#: the manifest's files: (sample rate, seconds); the 22.05 kHz ones are resampled to 16 kHz
FILES = [(16000 if i % 3 else 22050, 0.4 + 0.07 * i) for i in range(13)]


def _length(rate: int, seconds: float) -> int:
    """Samples at 16 kHz of a file of ``rate`` Hz lasting ``seconds``."""
    count = int(rate * seconds)
    return count if rate == 16000 else int(np.ceil(count * 16000 / rate))


@pytest.fixture(scope="module")
def manifest(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("speech-service")
    lines = []
    for i, (rate, seconds) in enumerate(FILES):
        path = str(root / f"utt{i}.flac")
        write(path, speech_like(rate, seconds, i), rate, "FLAC", "PCM_16")
        lines.append(json.dumps({"audio_filepath": path, "duration": seconds, "text": f"utterance {i}"}))
    (root / "manifest.json").write_text("\n".join(lines) + "\n")
    return os.fspath(root / "manifest.json")


@pytest.fixture(scope="module")
def service(cluster, manifest):
    svc = rp.serve(
        speech_features,
        name="svc-speech",
        manifest=manifest,
        world_size=WORLD,
        seed=3,
        num_cpus_per_actor=0.25,
        replace=True,
    )
    yield svc
    svc.shutdown()


def test_each_file_once_per_epoch_with_its_length(service):
    loaders = [rp.loader("svc-speech", rank=r, world_size=WORLD, output="numpy") for r in range(WORLD)]
    for epoch in (0, 1):
        seen, batches = [], []
        for ld in loaders:
            ld.set_epoch(epoch)
            count = 0
            for audio, features, idx in ld:
                count += 1
                audio = audio if isinstance(audio, list) else list(audio)
                features = features if isinstance(features, list) else list(features)
                for a, f, i, pad in zip(audio, features, np.asarray(idx).reshape(-1), ld.last_is_pad):
                    if pad:
                        continue
                    assert a.dtype == np.float32 and a.shape == (_length(*FILES[int(i)]),)
                    assert f.dtype == np.float32 and f.shape == (64, a.shape[0] // 160 + 1)
                    seen.append(int(i))
            batches.append(count)
        assert sorted(seen) == list(range(len(FILES))), f"epoch {epoch}: each file exactly once"
        assert batches[0] == batches[1] > 0, "the ranks step together"


def test_padded_audio_keeps_each_length(service):
    loader = rp.loader("svc-speech", rank=0, world_size=WORLD, output="numpy", pad_ragged=True)
    loader.set_epoch(0)
    for audio, features, idx in loader:
        shapes = loader.last_shapes[0]
        assert audio.ndim == 2 and audio.shape[1] == shapes[:, 0].max()
        for row, (length,), i, pad in zip(audio, shapes, np.asarray(idx).reshape(-1), loader.last_is_pad):
            if not pad:
                assert length == _length(*FILES[int(i)]) and not row[length:].any()
        assert features.shape[1:] == (64, loader.last_shapes[1][:, 1].max())
