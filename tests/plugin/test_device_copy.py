"""Device batches reach torch as copies torch owns; the pipeline's arrays are held until copied."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe.backend import gpu_available
from raypipe.plugin.device_copy import HeldUntilCopied, torch_dtype


class _TorchSignal:
    """A stand-in with a torch CUDA event's ``query()`` that the test sets."""

    def __init__(self) -> None:
        self.passed = False

    def query(self) -> bool:
        return self.passed


class _CupySignal:
    """A stand-in with a cupy CUDA event's ``done`` (cupy events have no ``query()``)."""

    def __init__(self) -> None:
        self.passed = False

    @property
    def done(self) -> bool:
        return self.passed


@pytest.mark.parametrize("signal", [_TorchSignal, _CupySignal])
def test_sources_are_held_until_their_copies_ran_oldest_first(signal):
    held = HeldUntilCopied()
    first, second = signal(), signal()
    held.hold(np.zeros(3), first)
    held.hold(np.ones(3), second)
    assert len(held) == 2
    second.passed = True
    held.sweep()
    assert len(held) == 2, "copies on one stream finish in order: the later one waits for the first"
    first.passed = True
    held.sweep()
    assert len(held) == 0


def test_torch_dtype_matches_numpy():
    import torch

    assert torch_dtype(np.uint8) == torch.uint8 and torch_dtype("float16") == torch.float16
    assert torch_dtype(np.dtype(np.float32)) == torch.float32


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
def test_a_batch_handed_to_torch_survives_the_pipelines_next_batches(jpeg_files):
    """The training code keeps a tensor of batch 0 while the pipeline makes more batches in the same
    pool: with a view of the pool, batch 0's tensor would be overwritten."""
    import torch

    import raypipe as rp
    from raypipe import fn, types
    from raypipe.plugin.pytorch import to_torch

    @rp.pipeline_def(batch_size=4, num_threads=2, device_id=0, seed=1)
    def pipe_def():
        jpegs, _ = fn.readers.file(files=jpeg_files[:16], name="Reader")
        images = fn.decoders.image_random_crop(jpegs, device="mixed")
        images = fn.resize(images, resize_x=32, resize_y=32)
        return fn.crop_mirror_normalize(images, dtype=types.FLOAT)

    with pipe_def() as pipe:
        (first,) = pipe.run()
        kept = to_torch(first)
        expected = np.asarray(first.as_cpu()).copy()
        assert kept.data_ptr() != first.as_tensor().data.ptr, "torch owns its copy"
        del first
        for _ in range(6):
            pipe.run()
        torch.cuda.synchronize()
        assert np.array_equal(kept.cpu().numpy(), expected)
