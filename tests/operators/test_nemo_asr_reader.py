"""readers.nemo_asr: NeMo manifests of speech-like WAV, FLAC and OGG files against DALI 2.4's CPU
reader (every output, in DALI's order and types: downmixed float audio, the file's sample rate, the
transcript's UTF-8 bytes, the entry's index; resampling, dtypes, duration bounds, several manifests,
shards), and its own rules without DALI (relative paths, errors, shuffling within an epoch).

Tolerance: decoded as decoders.audio decodes (see its tests): equal without resampling except OGG
Vorbis; within 2e-6 of full scale, or 1 LSB for int16, where resampled."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, ops, types
from raypipe.errors import ReaderError
from tests.audio_data import FILES, write_files

TEXTS = ["the quick brown fox", "über café", "", "jumps over", "the lazy dog"]


@pytest.fixture(scope="module")
def manifests(tmp_path_factory) -> tuple[str, str]:
    """Two manifests: the first lists three of the files, the second two."""
    root = tmp_path_factory.mktemp("nemo")
    os.makedirs(root / "audio")
    paths = write_files(str(root / "audio"))
    lines = []
    for (name, path), text in zip(paths.items(), TEXTS):
        entry = {"audio_filepath": path, "duration": FILES[name][3], "text": text}
        if not text:
            del entry["text"]
        lines.append(json.dumps(entry, ensure_ascii=False))
    first, second = root / "train.json", root / "more.json"
    first.write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")
    second.write_text("\n".join(lines[3:]) + "\n\n", encoding="utf-8")
    return str(first), str(second)


def _dali_epoch(kwargs: dict, count: int) -> list[list[np.ndarray]]:
    pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn as dali_fn
    from nvidia.dali import pipeline_def
    from nvidia.dali import types as dali_types

    @pipeline_def(batch_size=count, num_threads=1, device_id=None, seed=0)
    def pipe():
        out = dali_fn.readers.nemo_asr(**_typed(kwargs, dali_types))
        return tuple(out) if isinstance(out, (list, tuple)) else out

    p = pipe()
    p.build()
    outs = p.run()
    outs = outs if isinstance(outs, tuple) else (outs,)
    return [[np.asarray(o[i]) for i in range(count)] for o in outs]


def _our_epoch(kwargs: dict, count: int) -> list[list[np.ndarray]]:
    @rp.pipeline_def(batch_size=count, num_threads=1, seed=0)
    def pipe():
        out = fn.readers.nemo_asr(**_typed(kwargs, types))
        return tuple(out) if isinstance(out, (list, tuple)) else out

    with pipe() as p:
        outs = p.run()
    outs = outs if isinstance(outs, tuple) else (outs,)
    return [[np.asarray(o.at(i)) for i in range(count)] for o in outs]


def _typed(kwargs: dict, module) -> dict:
    return {k: getattr(module, v) if k == "dtype" else v for k, v in kwargs.items()}


def _close(got: np.ndarray, expected: np.ndarray, exact: bool) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if exact:
        np.testing.assert_array_equal(got, expected)
    else:
        scale = float(np.iinfo(got.dtype).max) if got.dtype.kind == "i" else 1.0
        bound = 1.0 if got.dtype == np.int16 else 2e-6 * scale
        assert np.abs(got.astype(np.float64) - expected.astype(np.float64)).max() <= bound


# (id, reader arguments beyond the manifests, the names kept, whether resampled)
CASES = [
    ("defaults", {}, list(FILES), False),
    (
        "resampled-int16-idxs",
        {"sample_rate": 16000.0, "dtype": "INT16", "read_idxs": True, "max_duration": 1.35},
        ["mono16k.wav", "stereo22k.wav", "mono44k.flac", "mono16k.ogg"],
        True,
    ),
    (
        "stereo-min-duration",
        {"downmix": False, "min_duration": 1.0, "read_text": False, "quality": 70},
        ["mono16k.wav", "stereo8k.flac", "mono16k.ogg"],
        False,
    ),
    ("audio-only", {"read_sample_rate": False, "read_text": False, "dtype": "INT32"}, list(FILES), False),
]


@pytest.mark.parametrize("case, kwargs, kept, resampled", CASES, ids=[c[0] for c in CASES])
def test_against_dali(manifests, case, kwargs, kept, resampled):
    args = {"manifest_filepaths": list(manifests), **kwargs}
    theirs, mine = _dali_epoch(args, len(kept)), _our_epoch(args, len(kept))
    assert len(mine) == len(theirs)
    for name, got, expected in zip(kept, mine[0], theirs[0], strict=True):
        exact = not name.endswith(".ogg") and not (resampled and FILES[name][2] != kwargs["sample_rate"])
        _close(got, expected, exact)
    for my_output, their_output in zip(mine[1:], theirs[1:], strict=True):
        for got, expected in zip(my_output, their_output, strict=True):
            assert got.dtype == expected.dtype and got.shape == expected.shape
            np.testing.assert_array_equal(got, expected)


def test_relative_paths_are_relative_to_the_working_directory(manifests, monkeypatch):
    root = os.path.dirname(manifests[0])
    relative = os.path.join(root, "relative.json")
    with open(relative, "w", encoding="utf-8") as f:
        f.write(json.dumps({"audio_filepath": os.path.join("audio", "mono44k.flac"), "text": "x"}) + "\n")
    monkeypatch.chdir(root)
    args = {"manifest_filepaths": relative, "read_text": False}
    theirs, mine = _dali_epoch(args, 1), _our_epoch(args, 1)
    np.testing.assert_array_equal(mine[0][0], theirs[0][0])
    assert float(mine[1][0]) == float(theirs[1][0]) == 44100


def test_outputs_without_dali(manifests):
    audio, rates, texts, idxs = _our_epoch({"manifest_filepaths": list(manifests), "read_idxs": True}, len(FILES))
    assert [a.ndim for a in audio] == [1] * len(FILES) and all(a.dtype == np.float32 for a in audio)
    assert [float(r) for r in rates] == [FILES[name][2] for name in FILES]
    assert [bytes(t).decode("utf-8") for t in texts] == TEXTS
    assert [i.tolist() for i in idxs] == [[0], [1], [2], [0], [1]], "the index within each manifest"
    assert [a.size for a in audio] == [int(FILES[n][2] * FILES[n][3]) for n in FILES]


@pytest.mark.parametrize("shard_id", [0, 1])
def test_shards_against_dali(manifests, shard_id):
    args = {"manifest_filepaths": list(manifests), "num_shards": 2, "shard_id": shard_id, "read_idxs": True}
    size = 2 if shard_id == 0 else 3  # DALI's shards of 5 entries: [0, 2) and [2, 5)
    theirs, mine = _dali_epoch(args, size), _our_epoch(args, size)
    assert [i.tolist() for i in mine[3]] == [i.tolist() for i in theirs[3]]
    assert [a.shape for a in mine[0]] == [a.shape for a in theirs[0]]


def test_each_entry_once_per_epoch_when_shuffled(manifests):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=3)
    def pipe():
        _, idx = fn.readers.nemo_asr(
            manifest_filepaths=list(manifests),
            read_sample_rate=False,
            read_text=False,
            read_idxs=True,
            random_shuffle=True,
            initial_fill=8,
            pad_last_batch=True,
            name="speech",
        )
        return idx

    with pipe() as p:
        assert p.reader_meta("speech")["epoch_size"] == len(FILES)
        seen = []
        for _ in range(3):
            (idx,) = p.run()
            seen += [int(idx.at(i)[0]) for i in range(len(idx))]
    assert sorted(seen[:5]) == [0, 0, 1, 1, 2], "each entry once in the epoch's five samples"


def test_old_names_and_errors(manifests, tmp_path):
    args = {"manifest_filepaths": manifests[0], "read_text": False, "read_sample_rate": False}
    (a,) = _our_epoch(args, 3)
    assert ops.NemoAsrReader is ops.readers.NemoAsr

    @rp.pipeline_def(batch_size=3, num_threads=1)
    def old():
        return fn.nemo_asr_reader(**args)

    with old() as p:
        (b,) = p.run()
    for x, y in zip(a, [np.asarray(b.at(i)) for i in range(3)], strict=True):
        np.testing.assert_array_equal(x, y)
    bad = tmp_path / "bad.json"
    bad.write_text('{"audio_filepath": "a.wav"}\n{"text": "no file"}\n')
    with pytest.raises(ReaderError, match=r"bad.json:2"):
        _our_epoch({"manifest_filepaths": str(bad)}, 1)
    with pytest.raises(ReaderError, match="list no audio"):
        _our_epoch({"manifest_filepaths": manifests[0], "max_duration": 0.1}, 1)
    with pytest.raises(rp.ArgumentError, match="manifest_filepaths"):
        _our_epoch({}, 1)
