"""What the service takes from an external source, without Ray: the epoch's length probed from a
per-sample SampleInfo source in about 2 log2(n) calls (never reading the epoch), the digest of
length and name, and a clear refusal of every source it cannot drive."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, types
from raypipe.errors import ArgumentError
from raypipe.source_dataset import MAX_PROBED, served_dataset


class Counted:
    """A per-sample source of ``n`` samples that counts its calls."""

    def __init__(self, n: int):
        self.n = n
        self.calls: list[int] = []

    def __call__(self, info: types.SampleInfo):
        self.calls.append(info.idx_in_epoch)
        if info.idx_in_epoch >= self.n:
            raise StopIteration
        return np.array([info.idx_in_epoch])


def _served(source, batch_size: int = 4, **kwargs) -> tuple[int, str]:
    pipe = rp.pipeline_def(lambda: fn.external_source(source, **kwargs), batch_size=batch_size, device_id=None)()
    return served_dataset(pipe)


@pytest.mark.parametrize("n", [1, 2, 5, 22, 64, 65, 1000])
def test_the_length_is_probed_in_logarithmic_calls(n):
    source = Counted(n)
    length, _ = _served(source, batch=False)
    assert length == n
    assert len(source.calls) <= 2 * max(1, n).bit_length() + 2
    assert len(set(source.calls)) == len(source.calls), "no index is asked twice"


def test_the_source_ends_by_its_sample_infos_iteration_as_dalis_examples_do():
    def by_iteration(info: types.SampleInfo):
        if info.iteration >= 3:  # DALI's parallel tutorial ends its epoch this way
            raise StopIteration
        return np.array([info.idx_in_batch])

    assert _served(by_iteration, batch_size=5, batch=False)[0] == 15


def test_the_digest_is_the_length_and_the_sources_name():
    assert _served(Counted(10), batch=False) == _served(Counted(10), batch=False)
    assert _served(Counted(10), batch=False)[1] != _served(Counted(11), batch=False)[1]

    def other(info):
        if info.idx_in_epoch >= 10:
            raise StopIteration
        return np.zeros(1)

    assert _served(other, batch=False)[1] != _served(Counted(10), batch=False)[1]


def _batches():
    yield [np.zeros(1)] * 4


@pytest.mark.parametrize(
    ("source", "kwargs", "why"),
    [
        (lambda: iter([[np.zeros(1)] * 4]), {}, "returns whole batches"),
        (_batches, {}, "is a generator function"),
        ([[np.zeros(1)] * 4], {}, "is an iterable"),
        (lambda info: [np.zeros(1)] * 4, {"batch_info": True}, "returns whole batches"),
        (lambda: np.zeros(1), {"batch": False}, "without a SampleInfo argument"),
        (None, {"name": "fed"}, "is fed with feed_input"),
    ],
)
def test_sources_the_service_cannot_drive_are_refused_saying_why(source, kwargs, why):
    with pytest.raises(ArgumentError, match=why) as refused:
        _served(source, **kwargs)
    assert "fn.external_source(source=sample, batch=False)" in str(refused.value)


def test_an_empty_or_endless_source_is_refused():
    with pytest.raises(ArgumentError, match="StopIteration for sample 0"):
        _served(Counted(0), batch=False)
    with pytest.raises(ArgumentError, match="never raises StopIteration"):
        _served(lambda info: np.zeros(1), batch=False)
    assert MAX_PROBED >= 1 << 40


def _read_pairs(images, masks):
    image, _ = fn.readers.file(files=images, name="Images")
    mask, _ = fn.readers.file(files=masks, name="Masks")
    return image, mask


def _served_readers(images, masks) -> tuple[int, str]:
    return served_dataset(rp.pipeline_def(_read_pairs, batch_size=4, device_id=None)(images, masks))


def test_several_readers_serve_their_common_length_and_a_digest_of_every_dataset(jpeg_files):
    length, digest = _served_readers(jpeg_files[:10], jpeg_files[10:20])
    assert length == 10
    assert _served_readers(jpeg_files[:10], jpeg_files[10:20]) == (length, digest)
    other_length, other_digest = _served_readers(jpeg_files[:10], jpeg_files[14:24])
    assert other_length == 10 and other_digest != digest, "another second dataset is another digest"
    one = rp.pipeline_def(lambda: fn.readers.file(files=jpeg_files[:10])[0], batch_size=4, device_id=None)()
    assert served_dataset(one) == (10, one.dataset_digest()), "one reader: its own digest, as before"


def test_a_source_beside_a_reader_is_refused_for_the_service(jpeg_files):
    def define():
        jpegs, _ = fn.readers.file(files=jpeg_files[:4], name="Reader")
        return jpegs, fn.external_source(lambda: [np.zeros(1)] * 4, name="masks")

    with pytest.raises(ArgumentError, match="external source 'masks' beside reader 'Reader' runs in one process"):
        served_dataset(rp.pipeline_def(define, batch_size=4, device_id=None)())
