"""The resampler's two ways of summing DALI's windowed-sinc taps agree: one matrix per kind of
block (the usual rate pairs) and outputs grouped by table phase (every pair). Both are checked
against DALI itself in test_audio_decoder.py."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe.operators import audio_resampling as ar


@pytest.mark.parametrize(
    "in_rate,out_rate", [(22050, 16000), (44100, 16000), (48000, 16000), (8000, 16000), (16000, 22050)]
)
@pytest.mark.parametrize("channels", [1, 2])
def test_block_matrices_sum_the_taps_as_the_phase_groups_do(in_rate, out_rate, channels):
    signal = np.random.default_rng(in_rate + channels).standard_normal((2 * in_rate + 77, channels))
    signal = (0.3 * signal).astype(np.float32)
    lobes = ar.lobes_for(50)
    count = ar.resampled_length(signal.shape[0], in_rate, out_rate)
    fractions = ar._block_fractions(-(-count // 256), in_rate / out_rate)
    by_block = ar._by_block(signal, count, in_rate / out_rate, lobes, fractions)
    by_phase = ar._by_phase(signal, count, in_rate / out_rate, lobes)
    assert by_block.shape == by_phase.shape == (count, channels)
    np.testing.assert_allclose(by_block, by_phase, rtol=0, atol=1e-6)
    resampled = ar.resample(signal[:, 0], in_rate, out_rate, lobes)
    np.testing.assert_allclose(resampled, by_phase[:, 0], rtol=0, atol=1e-6)


def test_few_kinds_of_block_for_the_usual_rates_many_for_others():
    assert np.unique(ar._block_fractions(250, 22050 / 16000)).size == 5
    assert np.unique(ar._block_fractions(250, 48000 / 16000)).size == 1
    assert np.unique(ar._block_fractions(250, 22050 / 16001)).size > 32  # resampled by phase groups
