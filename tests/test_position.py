"""The one position contract, checked the same way on every stateful object of the library
(the rank loader and the pipeline actor are checked on a Ray cluster in tests/cluster)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.plugin import numpy as numpy_plugin
from raypipe.plugin import pytorch as torch_plugin
from raypipe.position import STATE_FORMAT, fingerprint, make_state, read_state


@rp.pipeline_def(batch_size=5, num_threads=2, seed=3)
def shuffled(files):
    jpegs, labels = fn.readers.file(files=files, labels=list(range(len(files))), random_shuffle=True, name="Reader")
    images = fn.decoders.image_random_crop(jpegs)
    return fn.resize(images, resize_x=24, resize_y=24), labels


def _pipeline(files, **kw):
    return shuffled(files, **kw)


def _torch_iterator(files, **kw):
    return torch_plugin.DALIGenericIterator(shuffled(files, **kw), ["images", "labels"], reader_name="Reader")


def _numpy_iterator(files, **kw):
    return numpy_plugin.DALIGenericIterator(shuffled(files, **kw), ["images", "labels"], reader_name="Reader")


def _take(obj, n):
    """The next ``n`` batches as (labels, pixel digest), across epoch ends."""
    out = []
    while len(out) < n:
        if isinstance(obj, rp.Pipeline):
            images, labels = obj.run()
            images, labels = np.asarray(images.as_cpu()), np.asarray(labels)
        else:
            try:
                (batch,) = next(obj)  # one dict: one pipeline
            except StopIteration:
                obj.reset()
                continue
            images, labels = np.asarray(batch["images"]), np.asarray(batch["labels"])
        out.append((labels.ravel().tolist(), hashlib.sha256(images.tobytes()).hexdigest()[:12]))
    return out


@pytest.mark.parametrize("make", [_pipeline, _torch_iterator, _numpy_iterator], ids=["pipeline", "torch", "numpy"])
@pytest.mark.parametrize("cut", [0, 2, 5, 7])
def test_state_resumes_at_the_same_batch(jpeg_files, make, cut):
    """24 samples in batches of 5: 5 batches per epoch; cuts before, inside and across epochs."""
    first = make(jpeg_files)
    _take(first, cut)
    state = first.state_dict()
    expected = _take(first, 6)
    assert state["format"] == STATE_FORMAT and {"fingerprint", "epoch", "offset"} <= set(state)
    assert (state["epoch"], state["offset"]) == (cut // 5, cut % 5 * 5)
    second = make(jpeg_files)
    second.load_state_dict(state)
    assert _take(second, 6) == expected
    third = make(jpeg_files)
    third.load_state_dict(second.state_dict())
    assert third.state_dict() == second.state_dict(), "resuming twice"


def test_a_state_from_another_seed_or_dataset_is_refused(jpeg_files):
    state = _pipeline(jpeg_files).state_dict()
    with pytest.raises(rp.ArgumentError, match=r"pipeline: the state was saved for another order: .*seed=3 \(here 4\)"):
        _pipeline(jpeg_files, seed=4).load_state_dict(state)
    with pytest.raises(rp.ArgumentError, match=r"dataset_len=24 \(here 23\)"):
        _pipeline(jpeg_files[:23]).load_state_dict(state)
    with pytest.warns(UserWarning, match="another order"):
        _pipeline(jpeg_files, seed=4).load_state_dict(state, strict=False)


def test_state_helpers_check_what_they_read():
    order = {"dataset_len": 10, "seed": 1}
    state = make_state(order, 2, 4, world_size=8)
    assert read_state(state, order, owner="x") == (2, 4) and state["world_size"] == 8
    assert fingerprint(order) == fingerprint(dict(reversed(order.items()))), "key order does not matter"
    for bad, message in (
        ([1], "must be a dict"),
        ({"epoch": 1}, "not a raypipe state dict"),
        ({**state, "format": 99}, "format 99"),
        ({**state, "offset": -1}, "offset must be a non-negative int"),
    ):
        with pytest.raises(rp.ArgumentError, match=message):
            read_state(bad, order, owner="x")
