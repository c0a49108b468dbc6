"""The CPU stage where decoding is deferred to the GPU runs a chunk node by node: the same results
as sample by sample, whatever the chunking; a bad sample is skipped or named; profiles count a call
per sample; a stop leaves the chunk undone. Built with the GPU node's split, no GPU needed."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.cpu_stage import CpuStage, SkippedSample
from raypipe.keyed_random import SampleContext
from raypipe.operators.decoders import EncodedImage
from raypipe.profile import SAMPLE, Profile

DEFERRED = {"on_gpu": True, "decode_on_gpu": True}


@rp.pipeline_def(batch_size=8, num_threads=1, seed=5)
def train(files, on_error="raise"):
    jpegs, labels = fn.readers.file(files=files, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, device="mixed", on_error=on_error)
    images = fn.resize(images, resize_x=32, resize_y=32)
    images = fn.crop_mirror_normalize(images, mirror=fn.random.coin_flip(), output_layout="CHW")
    return images, labels


def _stage(files, **args) -> CpuStage:
    return train(files=files, **args).engine.cpu_stage(DEFERRED)


def _plain(result) -> list:
    """A sample's results as comparable values (an EncodedImage by its header, window and bytes)."""
    if isinstance(result, SkippedSample):
        return [result]
    plain = []
    for value in result.values():
        if isinstance(value, EncodedImage):
            plain.append((value.width, value.height, value.window, value.data.tobytes()))
        else:
            plain.append(np.asarray(value).tolist())
    return plain


def test_a_deferred_stage_runs_by_node_and_a_host_one_by_sample(jpeg_files):
    assert _stage(jpeg_files).by_node
    assert not train(files=jpeg_files).engine.cpu_stage({"on_gpu": True, "decode_on_gpu": False}).by_node


@pytest.mark.parametrize("chunk", [1, 5, 16])
def test_by_node_results_are_the_samples_own_whatever_the_chunk(jpeg_files, chunk):
    stage = _stage(jpeg_files)
    ctxs = [SampleContext(5, 2, i) for i in range(len(jpeg_files))]
    alone = [_plain(stage.run_sample(ctx, 0, None)) for ctx in ctxs]
    chunked = [r for first in range(0, len(ctxs), chunk) for r in stage.run_chunk(ctxs[first : first + chunk], 0, None)]
    assert [_plain(r) for r in chunked] == alone
    by_op = {d.producer.op.schema.name: k for k, d in enumerate(stage.graph.host_results)}
    assert {r[by_op["random.coin_flip"]] for r in alone} == {0, 1}  # the mirror flips vary
    assert len({r[by_op["decoders.image_random_crop"]][2] for r in alone}) == len(alone)  # and so do the windows


@pytest.fixture()
def bad_files(tmp_path, jpeg_files):
    text = tmp_path / "notes.jpg"
    text.write_text("this is not an image")
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(open(jpeg_files[0], "rb").read()[:40])  # the header ends before the frame header
    return [jpeg_files[0], str(text), jpeg_files[1], str(cut), jpeg_files[2]]


def test_bad_samples_are_skipped_in_place(bad_files):
    stage = _stage(bad_files, on_error="skip")
    results = stage.run_chunk([SampleContext(5, 0, i) for i in range(5)], 0, None)
    skipped = {i: r for i, r in enumerate(results) if isinstance(r, SkippedSample)}
    assert sorted(skipped) == [1, 3]
    assert skipped[1].source == bad_files[1] and "not a recognised image format" in skipped[1].reason
    assert "truncated JPEG header" in skipped[3].reason
    for i in (0, 2, 4):
        assert _plain(results[i]) == _plain(stage.run_sample(SampleContext(5, 0, i), 0, None))


@pytest.mark.parametrize("index, message", [(1, "not a recognised image format"), (3, "truncated JPEG header")])
def test_a_bad_sample_is_named(bad_files, index, message):
    stage = _stage(bad_files)
    with pytest.raises(rp.DecodeError, match=message) as info:
        stage.run_chunk([SampleContext(5, 0, i) for i in (0, 2, index, 4)], 0, None)
    assert info.value.sample_index == index and info.value.source == bad_files[index]


def test_profile_counts_a_call_per_sample(bad_files):
    stage = _stage(bad_files, on_error="skip")
    stage.profile = Profile()
    for first in range(0, 40, 5):
        stage.run_chunk([SampleContext(5, 0, (first + k) % 5) for k in range(5)], 0, None)
    calls = {row["name"]: row["calls"] for row in stage.profile.report()["rows"]}
    reader, decoder, coin = (node.label for node in stage.graph.host_nodes)
    assert calls == {reader: 40, decoder: 40, coin: 24, SAMPLE: 24}


def test_a_stop_leaves_the_chunk_undone(jpeg_files):
    stop = threading.Event()
    stop.set()
    assert _stage(jpeg_files).run_chunk([SampleContext(5, 0, i) for i in range(4)], 0, None, stop) == []


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_file_gone_after_listing_is_named_or_skipped(tmp_path, jpeg_files, on_error):
    import shutil

    files = [str(tmp_path / f"{i}.jpg") for i in range(3)]
    for source, target in zip(jpeg_files, files):
        shutil.copyfile(source, target)

    @rp.pipeline_def(batch_size=3, num_threads=1, seed=5)
    def reading():
        jpegs, labels = fn.readers.file(files=files, on_error=on_error)
        return fn.decoders.image_random_crop(jpegs, device="mixed"), labels

    stage = reading().engine.cpu_stage(DEFERRED)
    (tmp_path / "1.jpg").unlink()
    ctxs = [SampleContext(5, 0, i) for i in range(3)]
    if on_error == "raise":
        with pytest.raises(rp.SampleError, match="cannot read") as info:
            stage.run_chunk(ctxs, 0, None)
        assert info.value.sample_index == 1
    else:
        results = stage.run_chunk(ctxs, 0, None)
        assert [isinstance(r, SkippedSample) for r in results] == [False, True, False]


def test_a_chunk_of_bad_samples_only_is_all_skipped(bad_files):
    stage = _stage(bad_files, on_error="skip")
    results = stage.run_chunk([SampleContext(5, 0, i) for i in (1, 3)], 0, None)
    assert [(r.sample_index, r.source) for r in results] == [(1, bad_files[1]), (3, bad_files[3])]
