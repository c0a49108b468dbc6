"""Host batches to the rank's GPU through reused pinned buffers, on a side stream (GPU only)."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe.backend import gpu_available

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")]


def test_uploads_match_the_host_arrays_and_reuse_their_pinned_buffers():
    import torch

    from cluster.host_upload import SLOTS, HostUpload

    upload = HostUpload("cuda:0")
    rng = np.random.default_rng(0)
    arrays = [rng.integers(0, 255, (8, 3, 32, 32), dtype=np.uint8) for _ in range(3 * SLOTS)]
    tensors = [upload.to_device(a) for a in arrays]
    held = upload.pinned_bytes
    assert 0 < held <= SLOTS * arrays[0].nbytes * 5 // 4 + SLOTS, "one pinned buffer per slot, reused"
    for array, tensor in zip(arrays, tensors):
        assert tensor.device == torch.device("cuda:0") and tensor.dtype == torch.uint8
        assert np.array_equal(tensor.cpu().numpy(), array)


def test_an_upload_does_not_wait_for_the_training_step():
    import torch

    from cluster.host_upload import HostUpload

    upload = HostUpload("cuda:0")
    torch.cuda._sleep(500_000_000)  # a long kernel on the current stream, as a training step
    tensor = upload.to_device(np.arange(1 << 16, dtype=np.float32))
    assert not torch.cuda.current_stream().query(), "the upload returned while the step still ran"
    assert torch.equal(tensor.cpu(), torch.arange(1 << 16, dtype=torch.float32))
