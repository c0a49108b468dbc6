"""A public DALI speech-recognition input pipeline run unchanged under raypipe (import renamed) and,
where DALI is installed, under DALI's CPU build: the same steps, shapes, dtypes, layouts and labels
per epoch, and the same features (within tolerance) where the pipeline is deterministic.

Tolerance of the validation features: they are log mel spectrograms normalized per band to zero
mean and unit variance, float32 in both, from audio decoded alike (resampled within 2e-6 of full
scale, see tests/operators/test_audio_decoder.py) through other FFTs and summation orders: within
1e-3 of DALI's (2e-4 measured)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.audio_data import speech_like, write
from tests.script_harness import as_dali_cpu, ported, run_script

pytest.importorskip("torch")

# NVIDIA/DeepLearningExamples, PyTorch/SpeechRecognition/Jasper/common/dali/pipeline.py (commit
# 48dc9adacd401a3f414400bee061dc9e0fc86b3f): DaliPipeline as written (fn.readers.file with
# file_root and file_list, speed perturbation as a per-sample decoders.audio sample_rate from
# fn.random.uniform, nonsilent_region + slice to trim silence, dither with fn.random.normal,
# preemphasis_filter, spectrogram, mel_filter_bank, to_decibels, shapes, normalize over time, pad
# to a multiple of pad_align), and from iterator.py (same commit) DaliJasperIterator's
# DALIGenericIterator(["audio", "label", "audio_shape"], reader_name="file_reader",
# dynamic_shape=True, auto_reset=True, DROP for training, PARTIAL for validation) and its __next__.
# The training features take SpecAugment's masks as written: anchors and shapes from an
# external_source (a generator function, cycle=True) beside the reader, applied by fn.erase (the
# docstrings of the three methods that make them are quoted with single quotes here).
# Changed: cutout_augment is None (as in that config); the iterator's
# transcripts (common.text) and .cuda() are left out; the Triton pipeline and its serialization are
# left out; the file list is written as data_loader.py's _dict_to_file writes it, the configs are
# configs/jasper10x5dr_speedp-online_speca.yaml's input (train) and input_val (validation) values;
# batches of 4 over the test's 10 files, two training epochs and one validation epoch.
JASPER = """
import nvidia.dali as dali
import nvidia.dali.fn as fn
import nvidia.dali.types as types
import multiprocessing
import numpy as np
import torch
import math
import itertools


class DaliPipeline():
    def __init__(self, *,
                 train_pipeline: bool,  # True if train pipeline, False if validation pipeline
                 device_id,
                 num_threads,
                 batch_size,
                 file_root: str,
                 file_list: str,
                 sample_rate,
                 discrete_resample_range: bool,
                 resample_range: list,
                 window_size,
                 window_stride,
                 nfeatures,
                 nfft,
                 frame_splicing_factor,
                 dither_coeff,
                 silence_threshold,
                 preemph_coeff,
                 pad_align,
                 max_duration,
                 mask_time_num_regions,
                 mask_time_min,
                 mask_time_max,
                 mask_freq_num_regions,
                 mask_freq_min,
                 mask_freq_max,
                 mask_both_num_regions,
                 mask_both_min_time,
                 mask_both_max_time,
                 mask_both_min_freq,
                 mask_both_max_freq,
                 preprocessing_device="gpu",
                 is_triton_pipeline=False):
        self._dali_init_log(locals())

        if torch.distributed.is_initialized():
            shard_id = torch.distributed.get_rank()
            n_shards = torch.distributed.get_world_size()
        else:
            shard_id = 0
            n_shards = 1

        self.preprocessing_device = preprocessing_device.lower()
        assert self.preprocessing_device == "cpu" or self.preprocessing_device == "gpu", \\
            "Incorrect preprocessing device. Please choose either 'cpu' or 'gpu'"
        self.frame_splicing_factor = frame_splicing_factor

        # TODO(janton): Implement this
        assert frame_splicing_factor == 1, "Frame splicing is not yet implemented"

        self.resample_range = resample_range
        self.discrete_resample_range = discrete_resample_range

        self.train = train_pipeline
        self.sample_rate = sample_rate
        self.dither_coeff = dither_coeff
        self.nfeatures = nfeatures
        self.max_duration = max_duration
        self.mask_params = {
            'time_num_regions': mask_time_num_regions,
            'time_min': mask_time_min,
            'time_max': mask_time_max,
            'freq_num_regions': mask_freq_num_regions,
            'freq_min': mask_freq_min,
            'freq_max': mask_freq_max,
            'both_num_regions': mask_both_num_regions,
            'both_min_time': mask_both_min_time,
            'both_max_time': mask_both_max_time,
            'both_min_freq': mask_both_min_freq,
            'both_max_freq': mask_both_max_freq,
        }
        self.do_remove_silence = True if silence_threshold is not None else False

        @dali.pipeline_def
        def dali_jasper_pipe():
            if is_triton_pipeline:
                assert not self.train, "Pipeline for Triton shall be a validation pipeline"
                if torch.distributed.is_initialized():
                    raise RuntimeError(
                        "You're creating Triton pipeline, using multi-process mode. Please use single-process mode.")
                encoded, label = fn.external_source(device="cpu", name="DALI_INPUT_0", no_copy=True)
            else:
                encoded, label = fn.readers.file(device="cpu", name="file_reader",
                                                 file_root=file_root, file_list=file_list, shard_id=shard_id,
                                                 num_shards=n_shards, shuffle_after_epoch=train_pipeline)

            speed_perturbation_coeffs = None
            if resample_range is not None:
                if discrete_resample_range:
                    values = [self.resample_range[0], 1.0, self.resample_range[1]]
                    speed_perturbation_coeffs = fn.random.uniform(device="cpu", values=values)
                else:
                    speed_perturbation_coeffs = fn.random.uniform(device="cpu", range=resample_range)

            if self.train and speed_perturbation_coeffs is not None:
                dec_sample_rate_arg = speed_perturbation_coeffs * self.sample_rate
            elif resample_range is None:
                dec_sample_rate_arg = self.sample_rate
            else:
                dec_sample_rate_arg = None

            audio, _ = fn.decoders.audio(encoded, sample_rate=dec_sample_rate_arg, dtype=types.FLOAT, downmix=True)

            if self.do_remove_silence:
                begin, length = fn.nonsilent_region(audio, cutoff_db=silence_threshold)
                audio = fn.slice(audio, begin, length, axes=[0])

            # Max duration drop is performed at DataLayer stage

            if self.preprocessing_device == "gpu":
                audio = audio.gpu()

            if self.dither_coeff != 0.:
                audio = audio + fn.random.normal(audio) * self.dither_coeff

            audio = fn.preemphasis_filter(audio, preemph_coeff=preemph_coeff)

            spec = fn.spectrogram(audio, nfft=nfft,
                                  window_length=window_size * sample_rate, window_step=window_stride * sample_rate)

            mel_spec = fn.mel_filter_bank(spec, sample_rate=sample_rate, nfilter=self.nfeatures, normalize=True)

            log_features = fn.to_decibels(mel_spec, multiplier=np.log(10), reference=1.0, cutoff_db=math.log(1e-20))

            log_features_len = fn.shapes(log_features)
            if self.frame_splicing_factor != 1:
                log_features_len = self._div_ceil(log_features_len, self.frame_splicing_factor)

            log_features = fn.normalize(log_features, axes=[1])
            log_features = fn.pad(log_features, axes=[1], fill_value=0, align=pad_align)

            if self.train and self._do_spectrogram_masking():
                anchors, shapes  = fn.external_source(source=self._cutouts_generator, num_outputs=2, cycle=True)
                log_features = fn.erase(log_features, anchor=anchors, shape=shapes, axes=[0, 1], fill_value=0,
                                        normalized_anchor=True)

            # When modifying DALI pipeline returns, make sure you update `output_map` in DALIGenericIterator invocation
            return log_features.gpu(), label.gpu(), log_features_len.gpu()

        self.pipe_handle = dali_jasper_pipe(batch_size=batch_size, num_threads=num_threads, device_id=device_id)

    def get_pipeline(self):
        return self.pipe_handle

    @classmethod
    def from_config(cls, train_pipeline: bool, device_id, batch_size, file_root: str, file_list: str, config_data: dict,
                    config_features: dict, device_type: str = "gpu", do_resampling: bool = True,
                    num_cpu_threads=multiprocessing.cpu_count()):

        max_duration = config_data['max_duration']
        sample_rate = config_data['sample_rate']
        silence_threshold = -60 if config_data['trim_silence'] else None

        # TODO Take into account resampling probablity
        # TODO     config_features['speed_perturbation']['p']

        if do_resampling and config_data['speed_perturbation'] is not None:
            resample_range = [config_data['speed_perturbation']['min_rate'],
                              config_data['speed_perturbation']['max_rate']]
            discrete_resample_range = config_data['speed_perturbation']['discrete']
        else:
            resample_range = None
            discrete_resample_range = False

        window_size = config_features['window_size']
        window_stride = config_features['window_stride']
        nfeatures = config_features['n_filt']
        nfft = config_features['n_fft']
        frame_splicing_factor = config_features['frame_splicing']
        dither_coeff = config_features['dither']
        pad_align = config_features['pad_align']
        pad_to_max_duration = config_features['pad_to_max_duration']
        assert not pad_to_max_duration, "Padding to max duration currently not supported in DALI"
        preemph_coeff = .97

        config_spec = config_features['spec_augment']
        if config_spec is not None:
            mask_time_num_regions = config_spec['time_masks']
            mask_time_min = config_spec['min_time']
            mask_time_max = config_spec['max_time']
            mask_freq_num_regions = config_spec['freq_masks']
            mask_freq_min = config_spec['min_freq']
            mask_freq_max = config_spec['max_freq']
        else:
            mask_time_num_regions = 0
            mask_time_min = 0
            mask_time_max = 0
            mask_freq_num_regions = 0
            mask_freq_min = 0
            mask_freq_max = 0

        config_cutout = config_features['cutout_augment']
        if config_cutout is not None:
            mask_both_num_regions = config_cutout['masks']
            mask_both_min_time = config_cutout['min_time']
            mask_both_max_time = config_cutout['max_time']
            mask_both_min_freq = config_cutout['min_freq']
            mask_both_max_freq = config_cutout['max_freq']
        else:
            mask_both_num_regions = 0
            mask_both_min_time = 0
            mask_both_max_time = 0
            mask_both_min_freq = 0
            mask_both_max_freq = 0

        inst = cls(train_pipeline=train_pipeline,
                   device_id=device_id,
                   preprocessing_device=device_type,
                   num_threads=num_cpu_threads,
                   batch_size=batch_size,
                   file_root=file_root,
                   file_list=file_list,
                   sample_rate=sample_rate,
                   discrete_resample_range=discrete_resample_range,
                   resample_range=resample_range,
                   window_size=window_size,
                   window_stride=window_stride,
                   nfeatures=nfeatures,
                   nfft=nfft,
                   frame_splicing_factor=frame_splicing_factor,
                   dither_coeff=dither_coeff,
                   silence_threshold=silence_threshold,
                   preemph_coeff=preemph_coeff,
                   pad_align=pad_align,
                   max_duration=max_duration,
                   mask_time_num_regions=mask_time_num_regions,
                   mask_time_min=mask_time_min,
                   mask_time_max=mask_time_max,
                   mask_freq_num_regions=mask_freq_num_regions,
                   mask_freq_min=mask_freq_min,
                   mask_freq_max=mask_freq_max,
                   mask_both_num_regions=mask_both_num_regions,
                   mask_both_min_time=mask_both_min_time,
                   mask_both_max_time=mask_both_max_time,
                   mask_both_min_freq=mask_both_min_freq,
                   mask_both_max_freq=mask_both_max_freq)
        return inst.get_pipeline()

    @staticmethod
    def _dali_init_log(args: dict):
        if (not torch.distributed.is_initialized() or (
                torch.distributed.is_initialized() and torch.distributed.get_rank() == 0)):  # print once
            max_len = max([len(ii) for ii in args.keys()])
            fmt_string = '\\t%' + str(max_len) + 's : %s'
            print('Initializing DALI with parameters:')
            for keyPair in sorted(args.items()):
                print(fmt_string % keyPair)

    @staticmethod
    def _div_ceil(dividend, divisor):
        return (dividend + (divisor - 1)) // divisor

    def _do_spectrogram_masking(self):
        return self.mask_params['time_num_regions'] > 0 or self.mask_params['freq_num_regions'] > 0 or \\
               self.mask_params['both_num_regions'] > 0

    @staticmethod
    def _interleave_lists(*lists):
        '''
        [*, **, ***], [1, 2, 3], [a, b, c] -> [*, 1, a, **, 2, b, ***, 3, c]
        Returns:
             iterator over interleaved list
        '''
        assert all((len(lists[0]) == len(test_l) for test_l in lists)), "All lists have to have the same length"
        return itertools.chain(*zip(*lists))

    def _generate_cutouts(self):
        '''
        Returns:
            Generates anchors and shapes of the cutout regions.
            Single call generates one batch of data.
            The output shall be passed to DALI's Erase operator
            anchors = [f0 t0 f1 t1 ...]
            shapes = [f0w t0h f1w t1h ...]
        '''
        MAX_TIME_DIMENSION = 20 * 16000
        freq_anchors = np.random.random(self.mask_params['freq_num_regions'])
        time_anchors = np.random.random(self.mask_params['time_num_regions'])
        both_anchors_freq = np.random.random(self.mask_params['both_num_regions'])
        both_anchors_time = np.random.random(self.mask_params['both_num_regions'])
        anchors = []
        for anch in freq_anchors:
            anchors.extend([anch, 0])
        for anch in time_anchors:
            anchors.extend([0, anch])
        for t, f in zip(both_anchors_time, both_anchors_freq):
            anchors.extend([f, t])

        shapes = []
        shapes.extend(
            self._interleave_lists(
                np.random.randint(self.mask_params['freq_min'], self.mask_params['freq_max'] + 1,
                                  self.mask_params['freq_num_regions']),
                # XXX: Here, a time dimension of the spectrogram shall be passed.
                #      However, in DALI ArgumentInput can't come from GPU.
                #      So we leave the job for Erase (masking operator) to get it together.
                [int(MAX_TIME_DIMENSION)] * self.mask_params['freq_num_regions']
            )
        )
        shapes.extend(
            self._interleave_lists(
                [self.nfeatures] * self.mask_params['time_num_regions'],
                np.random.randint(self.mask_params['time_min'], self.mask_params['time_max'] + 1,
                                  self.mask_params['time_num_regions'])
            )
        )
        shapes.extend(
            self._interleave_lists(
                np.random.randint(self.mask_params['both_min_freq'], self.mask_params['both_max_freq'] + 1,
                                  self.mask_params['both_num_regions']),
                np.random.randint(self.mask_params['both_min_time'], self.mask_params['both_max_time'] + 1,
                                  self.mask_params['both_num_regions'])
            )
        )
        return anchors, shapes

    def _cutouts_generator(self):
        '''
        Generator, that wraps cutouts creation in order to randomize inputs
        and allow passing them to DALI's ExternalSource operator
        '''

        def tuples2list(tuples: list):
            '''
            [(a, b), (c, d)] -> [[a, c], [b, d]]
            '''
            return map(list, zip(*tuples))

        [anchors, shapes] = tuples2list([self._generate_cutouts() for _ in range(self.pipe_handle.max_batch_size)])
        yield np.array(anchors, dtype=np.float32), np.array(shapes, dtype=np.float32)


class DaliJasperIterator(object):
    def __init__(self, dali_pipelines, transcripts, symbols, batch_size, reader_name, train_iterator: bool):
        self.transcripts = transcripts
        self.symbols = symbols
        self.batch_size = batch_size
        from nvidia.dali.plugin.pytorch import DALIGenericIterator
        from nvidia.dali.plugin.base_iterator import LastBatchPolicy

        self.dali_it = DALIGenericIterator(
            dali_pipelines, ["audio", "label", "audio_shape"], reader_name=reader_name,
            dynamic_shape=True, auto_reset=True,
            last_batch_policy=(LastBatchPolicy.DROP if train_iterator else LastBatchPolicy.PARTIAL))

    def __next__(self):
        data = self.dali_it.__next__()
        return data[0]["audio"], data[0]["audio_shape"][:, 1], data[0]["label"]

    def next(self):
        return self.__next__()

    def __iter__(self):
        return self


def _dict_to_file(dict: dict, filename: str):
    with open(filename, "w") as f:
        for key, value in dict.items():
            f.write("{} {}\\n".format(key, value))


CONFIG_DATA = {"sample_rate": 16000, "max_duration": 16.7, "trim_silence": True,
               "speed_perturbation": {"min_rate": 0.85, "max_rate": 1.15, "discrete": False}}
CONFIG_FEATURES = {"window_size": 0.02, "window_stride": 0.01, "n_filt": 64, "n_fft": 512, "frame_splicing": 1,
                   "dither": 0.00001, "pad_align": 16, "pad_to_max_duration": False,
                   "spec_augment": {"freq_masks": 2, "min_freq": 0, "max_freq": 20,
                                    "time_masks": 2, "min_time": 0, "max_time": 75},
                   "cutout_augment": None}
CONFIG_VAL_DATA = {"sample_rate": 16000, "max_duration": None, "trim_silence": True, "speed_perturbation": None}
CONFIG_VAL_FEATURES = dict(CONFIG_FEATURES, dither=0.0, spec_augment=None)

file_list_path = DATA + "/jasper_dali.file_list"
_dict_to_file(FILES, file_list_path)

RESULT = {}
for mode, train, data, features, epochs in (("train", True, CONFIG_DATA, CONFIG_FEATURES, 2),
                                            ("val", False, CONFIG_VAL_DATA, CONFIG_VAL_FEATURES, 1)):
    pipeline = DaliPipeline.from_config(config_data=data, config_features=features, device_id=0,
                                        file_root=DATA, file_list=file_list_path,
                                        device_type="gpu", batch_size=4, train_pipeline=train, num_cpu_threads=2)
    iterator = DaliJasperIterator([pipeline], transcripts={}, symbols=[], batch_size=4,
                                  reader_name="file_reader", train_iterator=train)
    RESULT[mode] = []
    for epoch in range(epochs):
        steps = []
        for audio, audio_len, label in iterator:
            steps.append({"audio": audio.numpy(), "audio_len": audio_len.numpy(), "label": label.numpy()})
        RESULT[mode].append(steps)
"""

#: the test's files: name -> (sample rate, seconds), labels in order
AUDIO = {f"utt{i}.{'flac' if i % 3 else 'wav'}": (22050 if i % 4 == 1 else 16000, 0.8 + 0.15 * i) for i in range(10)}


@pytest.fixture(scope="module")
def speech_root(tmp_path_factory) -> tuple[str, dict[str, int]]:
    root = str(tmp_path_factory.mktemp("speech"))
    for seed, (name, (rate, seconds)) in enumerate(AUDIO.items()):
        fmt = "FLAC" if name.endswith(".flac") else "WAV"
        write(os.path.join(root, name), speech_like(rate, seconds, seed), rate, fmt, "PCM_16")
    return root, {name: label for label, name in enumerate(AUDIO)}


def _layout(steps: list[dict]) -> list[tuple]:
    return [(s["audio"].shape[:2], s["audio"].dtype, s["label"].shape, s["audio_len"].dtype) for s in steps]


def _masked(step: dict) -> tuple[int, int]:
    """How many of a batch's samples have a feature row, and a frame, all zeros within their frames."""
    rows = cols = 0
    for features, frames in zip(step["audio"], step["audio_len"]):
        valid = features[:, : int(frames)]
        rows += bool((valid == 0).all(axis=1).any())
        cols += bool((valid == 0).all(axis=0).any())
    return rows, cols


def test_jasper_pipeline(speech_root):
    root, files = speech_root
    result = ported(JASPER, root, FILES=files)
    train, (val,) = result["train"], result["val"]
    assert [len(steps) for steps in train] == [2, 2], "10 files in batches of 4, the last dropped"
    assert len(val) == 3 and [s["audio"].shape[0] for s in val] == [4, 4, 2], "the last batch partial"
    for step in [s for steps in train for s in steps] + val:
        batch, features, frames = step["audio"].shape
        assert features == 64 and frames % 16 == 0 and step["audio"].dtype == np.float32
        assert frames - 16 < step["audio_len"].max() <= frames, "padded to the batch's longest, aligned to 16"
    assert sorted(int(v) for s in val for v in s["label"].ravel()) == list(range(10))
    for steps in train:
        labels = [int(v) for s in steps for v in s["label"].ravel()]
        assert len(set(labels)) == 8, "an epoch's 8 steps' samples are 8 different files"
    lengths = {int(v): int(n) for s in val for v, n in zip(s["label"].ravel(), s["audio_len"])}
    for step in [s for steps in train for s in steps]:
        for label, frames in zip(step["label"].ravel(), step["audio_len"]):
            assert 0.85 * lengths[int(label)] - 2 <= frames <= 1.15 * lengths[int(label)] + 2, "resampled by 0.85-1.15"
    masked = [_masked(step) for steps in train for step in steps]
    rows = sum(r for r, _ in masked)
    cols = sum(c for _, c in masked)
    assert rows >= len(masked) - 2 and cols >= len(masked) - 2, "SpecAugment masks features and frames"
    assert [_masked(step) for step in val] == [(0, 0)] * len(val), "no masks in validation"
    pytest.importorskip("nvidia.dali")
    dali = run_script(as_dali_cpu(JASPER), root, FILES=files)
    assert [len(steps) for steps in dali["train"]] == [len(steps) for steps in train]
    assert _layout(dali["val"][0]) == _layout(val)
    for ours, theirs in zip(val, dali["val"][0], strict=True):
        np.testing.assert_array_equal(ours["label"], theirs["label"])
        np.testing.assert_array_equal(ours["audio_len"], theirs["audio_len"])
        assert ours["audio"].shape == theirs["audio"].shape
        assert np.abs(ours["audio"] - theirs["audio"]).max() < 1e-3
    for ours, theirs in zip(train, dali["train"], strict=True):
        assert [s["audio"].shape[:2] for s in ours] == [s["audio"].shape[:2] for s in theirs]
        assert [s["audio"].dtype for s in ours] == [s["audio"].dtype for s in theirs]
