"""Decoders on real JPEG files against Pillow; bad files raise or are skipped and counted."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from PIL import Image

import raypipe as rp
from raypipe import fn, types
from raypipe.backend import gpu_available
from raypipe.decode_plan import DecodePlan
from raypipe.exif import ExifOrientationWarning
from raypipe.gpu_decode import nvimgcodec_available
from raypipe.keyed_random import SampleContext, keyed_uniforms
from raypipe.operators.convert_norm import ConvertNorm
from raypipe.operators.crop_window import DRAWS, random_crop_window
from raypipe.operators.decoders import EncodedImage, ImageDecoder, ImageRandomCropDecoder


@rp.pipeline_def(batch_size=4, num_threads=2, seed=11)
def decode(files, device="cpu", **decoder_args):
    jpegs, labels = fn.readers.file(files=files, name="Reader")
    return fn.decoders.image(jpegs, device=device, **decoder_args), labels


@pytest.mark.parametrize("device", ["cpu", "mixed"])
@pytest.mark.parametrize("output_type, mode", [(types.RGB, "RGB"), (types.GRAY, "L"), (types.BGR, "RGB")])
def test_image_matches_pillow(jpeg_files, device, output_type, mode):
    with decode(jpeg_files[:4], device=device, output_type=output_type) as pipe:
        images, _ = pipe.run()
    assert images.device == ("gpu" if device == "mixed" else "cpu")
    images = images.as_cpu()
    for i, path in enumerate(jpeg_files[:4]):
        image = Image.open(path)
        image.draft(mode, image.size)  # gray: the JPEG's luma channel, as DALI decodes it
        ref = np.asarray(image.convert(mode))
        ref = ref[:, :, None] if mode == "L" else ref
        ref = ref[:, :, ::-1] if output_type is types.BGR else ref
        assert np.array_equal(images.at(i), ref)  # exact: the same libjpeg-turbo


@pytest.mark.parametrize("decoder", ["image", "image_crop"])
def test_gray_is_the_luma_channel_as_in_dali(ours, dali, jpeg_files, decoder):
    """DALI's gray output of a JPEG is its decoded luma (Y) channel, not a weighing of the RGB
    decode, which differs by up to ~20 levels."""
    data = [np.fromfile(path, np.uint8) for path in jpeg_files[:4]]

    def build(x, f, t):
        if decoder == "image":
            return f.decoders.image(x, output_type=t.GRAY)
        return f.decoders.image_crop(x, output_type=t.GRAY, crop=(100, 120), crop_pos_x=0.3, crop_pos_y=0.7)

    ((mine, _),) = ours(data, lambda x: build(x, fn, types))
    ((theirs, _),) = dali(data, build)
    for a, b in zip(mine, theirs, strict=True):
        assert a.shape == b.shape and a.shape[2] == 1
        np.testing.assert_array_equal(a, b)


@rp.pipeline_def(batch_size=4, num_threads=2, seed=11)
def random_crop(files, resize_to=None, **decoder_args):
    jpegs, _ = fn.readers.file(files=files, name="Reader")
    images = fn.decoders.image_random_crop(jpegs, **decoder_args)
    if resize_to is not None:
        images = fn.resize(images, resize_x=resize_to[0], resize_y=resize_to[1])
    return images


def _window(path, op_id, index, seed=11, epoch=0, area=(0.08, 1.0)):
    width, height = Image.open(path).size
    draws = keyed_uniforms(seed, op_id, epoch, [index], DRAWS * 10).reshape(DRAWS, 10)
    return random_crop_window(width, height, area, (3 / 4, 4 / 3), draws)


def test_image_random_crop_is_decode_then_crop_of_the_keyed_window(jpeg_files):
    with random_crop(jpeg_files[:8], num_threads=3) as pipe:
        (crops,) = pipe.run()
        (crops2,) = pipe.run()
    for i, path in enumerate(jpeg_files[:8]):
        x, y, w, h = _window(path, op_id=1, index=i)
        ref = np.asarray(Image.open(path).convert("RGB"))[y : y + h, x : x + w]
        got = (crops if i < 4 else crops2).at(i % 4)
        assert np.array_equal(got, ref)


def test_dct_downscaling_applies_to_large_crops_and_stays_close(tmp_path):
    from raypipe.datasets import synthetic_image

    path = str(tmp_path / "large.jpg")
    synthetic_image(np.random.default_rng(0), 2000, 1500).save(path, quality=90)
    args = {"random_area": (0.9, 1.0), "resize_to": (224, 224)}
    with random_crop([path] * 4, **args) as pipe:
        (fast,) = pipe.run()
        assert pipe._staged.decode_plans[pipe._staged.host_nodes[1]].target_size == (224, 224)
    x, y, w, h = _window(path, op_id=1, index=0, area=(0.9, 1.0))
    ref = Image.open(path).convert("RGB").resize((224, 224), Image.BILINEAR, box=(x, y, x + w, y + h))
    diff = np.abs(np.asarray(fast.at(0), dtype=np.int16) - np.asarray(ref, dtype=np.int16))
    # DCT-domain 1/4 scaling then bilinear vs full decode then bilinear: close, not identical
    assert diff.mean() < 3.0, diff.mean()


def test_no_dct_hint_when_output_is_also_returned(jpeg_files):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=0)
    def both(files):
        jpegs, _ = fn.readers.file(files=files)
        crops = fn.decoders.image_random_crop(jpegs)
        return crops, fn.resize(crops, resize_x=64, resize_y=64)

    with both(jpeg_files[:2]) as pipe:
        pipe.build()
        assert pipe._staged.decode_plans[pipe._staged.host_nodes[1]].target_size is None


@pytest.fixture()
def bad_files(tmp_path, jpeg_files):
    data = open(jpeg_files[0], "rb").read()
    truncated = tmp_path / "truncated.jpg"
    truncated.write_bytes(data[: len(data) // 3])
    text = tmp_path / "notes.jpg"
    text.write_text("this is not an image")
    return [str(truncated), str(text)]


@pytest.mark.parametrize("decoder", ["image", "image_random_crop"])
@pytest.mark.parametrize("which, message", [(0, "truncated"), (1, "not a recognised image format")])
def test_bad_image_names_the_file(jpeg_files, bad_files, decoder, which, message):
    files = [jpeg_files[0], bad_files[which]]

    @rp.pipeline_def(batch_size=2, num_threads=2, seed=0)
    def pipe_def():
        jpegs, _ = fn.readers.file(files=files)
        return getattr(fn.decoders, decoder)(jpegs)

    with pipe_def() as pipe:
        with pytest.raises(rp.DecodeError, match=message) as info:
            pipe.run()
    assert info.value.source == bad_files[which] and info.value.sample_index == 1
    assert bad_files[which] in str(info.value)


def test_on_error_skip_counts_and_reports(jpeg_files, bad_files):
    files = [jpeg_files[0], bad_files[0], jpeg_files[1], bad_files[1]]
    with decode(files, on_error="skip") as pipe:
        images, labels = pipe.run()
        assert len(images) == 2 and np.asarray(labels).ravel().tolist() == [0, 2]
        skipped = pipe.skipped_samples
        assert [(s.sample_index, s.source) for s in skipped] == [(1, bad_files[0]), (3, bad_files[1])]
        assert "truncated" in skipped[0].reason and pipe.last_batch_info.sample_indices == [0, 2]


def test_decoder_argument_errors(jpeg_files):
    with pytest.raises(rp.ArgumentError, match="on_error must be 'raise' or 'skip'"):
        decode(jpeg_files[:1], on_error="ignore").build()
    with pytest.raises(rp.ArgumentError, match="random_area must lie in"):
        random_crop(jpeg_files[:1], random_area=(0.5, 2.0)).build()


# what DALI's ResNet-50 example passes its decoders
RN50_HINTS = {
    "device_memory_padding": 211025920,
    "host_memory_padding": 140544512,
    "preallocate_width_hint": 5980,
    "preallocate_height_hint": 6430,
    "hw_decoder_load": 0.65,
    "hybrid_huffman_threshold": 1000000,
    "affine": True,
    "jpeg_fancy_upsampling": True,
    "split_stages": False,  # deprecated in DALI
    "use_chunk_allocator": False,  # deprecated in DALI
    "adjust_orientation": False,
}


@pytest.mark.parametrize("device", ["cpu", "mixed"])
def test_dali_memory_hints_are_accepted_and_change_no_pixel(jpeg_files, device):
    batches = []
    for hints in ({}, RN50_HINTS):
        with random_crop(jpeg_files[:8], resize_to=(32, 24), device=device, num_attempts=100, **hints) as pipe:
            batches.append([np.asarray(pipe.run()[0].as_cpu()) for _ in range(2)])
    np.testing.assert_array_equal(np.stack(batches[0]), np.stack(batches[1]))


CACHE_HINTS = {
    "cache_size": 2000,
    "cache_type": "threshold",
    "cache_threshold": 250000,
    "cache_debug": False,
    "cache_batch_copy": True,
    "memory_stats": True,
}


@pytest.mark.parametrize("device", ["cpu", "mixed"])
def test_cache_hints_and_memory_stats_are_accepted_and_change_no_pixel(jpeg_files, device):
    batches = []
    for hints in ({}, CACHE_HINTS, {"cache_size": 10, "cache_type": "largest"}):
        with decode(jpeg_files[:8], device=device, **hints) as pipe:
            images = [pipe.run()[0].as_cpu() for _ in range(2)]
            batches.append([np.asarray(tl.at(i)) for tl in images for i in range(len(tl))])
    for hinted in batches[1:]:
        for a, b in zip(batches[0], hinted, strict=True):
            np.testing.assert_array_equal(a, b)
    with random_crop(jpeg_files[:4], resize_to=(32, 24), memory_stats=False) as pipe:
        pipe.run()


@pytest.mark.parametrize(
    "args, message",
    [
        ({"device_memory_padding": -1}, "device_memory_padding must be a non-negative int, got -1"),
        ({"preallocate_width_hint": 1.5}, "preallocate_width_hint must be a non-negative int"),
        ({"hw_decoder_load": 1.5}, r"hw_decoder_load must be a number in \[0, 1\], got 1.5"),
        ({"affine": "yes"}, "affine must be a bool"),
        ({"cache_sizes": 100}, "unexpected argument.*cache_sizes"),
        ({"cache_size": -1}, "cache_size must be a non-negative int, got -1"),
        ({"cache_type": "lru"}, "cache_type must be one of"),
        ({"memory_stats": 1}, "memory_stats must be a bool"),
        ({"jpeg_fancy_upsampling": "yes"}, "jpeg_fancy_upsampling must be a bool"),
        ({"adjust_orientation": True}, "adjust_orientation=True is not supported: images are decoded as stored"),
        ({"adjust_orientation": "no"}, "adjust_orientation must be a bool"),
    ],
)
def test_decoder_hint_errors_name_the_argument(jpeg_files, args, message):
    with pytest.raises(rp.ArgumentError, match=rf"decoders.image: {message}"):
        decode(jpeg_files[:1], **args).build()


@pytest.mark.parametrize("fancy", [True, False])
def test_jpeg_fancy_upsampling_gives_dalis_cpu_decode(jpeg_files, fancy):
    """DALI's CPU decoder upsamples chroma the fancy way whatever ``jpeg_fancy_upsampling`` says (its mixed
    decoder does with ``True``), as raypipe's decoders always do: the same pixels as DALI's."""
    dali = pytest.importorskip("nvidia.dali")

    @dali.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def theirs():
        jpegs, _ = dali.fn.readers.file(files=jpeg_files[:4])
        return dali.fn.decoders.image(jpegs, jpeg_fancy_upsampling=fancy)

    pipe = theirs()
    pipe.build()
    (expected,) = pipe.run()
    with decode(jpeg_files[:4], jpeg_fancy_upsampling=fancy) as ours:
        got, _ = ours.run()
    for i in range(4):
        np.testing.assert_array_equal(np.asarray(got.at(i)), np.asarray(expected[i]))


@pytest.fixture()
def rotated_files(tmp_path, jpeg_files):
    """Three JPEGs; the second carries EXIF orientation 6 (stored sideways, shown rotated)."""
    paths = []
    for i, source in enumerate(jpeg_files[:3]):
        exif = Image.Exif()
        if i == 1:
            exif[0x0112] = 6
        path = tmp_path / f"{i}.jpg"
        Image.open(source).save(path, "JPEG", quality=95, exif=exif)
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("decoder", ["image", "image_random_crop"])
def test_exif_orientation_is_named_once_unless_adjust_orientation_false(rotated_files, decoder):
    @rp.pipeline_def(batch_size=3, num_threads=2, seed=11)
    def pipe(**args):
        jpegs, _ = fn.readers.file(files=rotated_files)
        return getattr(fn.decoders, decoder)(jpegs, **args)

    with pytest.warns(ExifOrientationWarning, match="sample 1 is a JPEG with EXIF orientation 6") as caught:
        with pipe() as p:
            stored = [p.run()[0] for _ in range(3)]
    assert sum(issubclass(w.category, ExifOrientationWarning) for w in caught) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExifOrientationWarning)
        with pipe(adjust_orientation=False) as p:
            explicit = [p.run()[0] for _ in range(3)]
    for a, b in zip(stored, explicit):
        for i in range(3):
            np.testing.assert_array_equal(a.at(i), b.at(i))
    if decoder == "image":  # decoded as stored: Pillow's pixels, not rotated
        np.testing.assert_array_equal(stored[0].at(1), np.asarray(Image.open(rotated_files[1]).convert("RGB")))


def test_png_and_grayscale_inputs_convert_to_rgb(tmp_path):
    gray = tmp_path / "g.png"
    Image.fromarray(np.arange(64, dtype=np.uint8).reshape(8, 8), "L").save(gray)
    with decode([str(gray)], batch_size=1) as pipe:
        images, _ = pipe.run()
    out = images.at(0)
    assert out.shape == (8, 8, 3) and np.array_equal(out[:, :, 0], np.arange(64).reshape(8, 8))


def test_mixed_decoder_without_gpu_fuses_the_resize_like_cpu(jpeg_files):
    outputs = {}
    for device in ("cpu", "mixed"):
        with random_crop(jpeg_files[:4], resize_to=(64, 48), device=device) as pipe:
            (outputs[device],) = pipe.run()
            plan = pipe._staged.decode_plans[pipe._staged.host_nodes[1]]
            assert (plan.target_size, plan.resize_on_host, plan.deferred) == ((64, 48), True, False)
    assert outputs["mixed"].device == "gpu" and outputs["cpu"].device == "cpu"
    assert np.array_equal(np.asarray(outputs["mixed"].as_cpu()), np.asarray(outputs["cpu"]))


DEFERRED = DecodePlan(deferred=True)


def _deferred(decoder_cls, op_id=1, **args):
    """A mixed decoder; its calls below pass the plan of a decode deferred to the GPU (``DEFERRED``)."""
    return decoder_cls(device="mixed", op_id=op_id, **args)


def test_deferred_decoder_reads_the_header_and_draws_the_host_window(jpeg_files, bad_files):
    crop, whole = _deferred(ImageRandomCropDecoder), _deferred(ImageDecoder)
    for i, path in enumerate(jpeg_files[:4]):
        data = np.fromfile(path, np.uint8)
        out = crop.run_sample([data], {}, SampleContext(11, 0, i), DEFERRED)
        assert isinstance(out, EncodedImage) and out.data is data
        assert (out.width, out.height) == Image.open(path).size
        assert out.window == _window(path, op_id=1, index=i)
        assert out.out_size == out.window[2:]
        full = whole.run_sample([data], {}, SampleContext(11, 0, i), DEFERRED)
        assert full.window is None and full.out_size == Image.open(path).size
    not_an_image = np.fromfile(bad_files[1], np.uint8)
    with pytest.raises(rp.DecodeError, match="not a recognised image format"):
        crop.run_sample([not_an_image], {}, SampleContext(11, 0, 0), DEFERRED)
    skipping = _deferred(ImageDecoder, on_error="skip")
    assert "not a recognised" in skipping.run_sample([not_an_image], {}, SampleContext(11, 0, 0), DEFERRED).reason


def test_device_result_checks_shape_cuts_ignored_regions_and_orders_channels():
    op = _deferred(ImageRandomCropDecoder, output_type=types.BGR)
    image = np.arange(20 * 30 * 3, dtype=np.uint8).reshape(20, 30, 3)
    encoded = EncodedImage(np.zeros(1, np.uint8), 30, 20, (4, 5, 10, 8))
    cut = op._device_result(image[5:13, 4:14], encoded)
    assert np.array_equal(cut, image[5:13, 4:14, ::-1])
    assert np.array_equal(op._device_result(image, encoded), cut)  # a backend that ignored the region
    wrong = op._device_result(image[:7, :10], encoded)
    assert isinstance(wrong, rp.DecodeError) and "produced 10x7, expected 10x8" in str(wrong)
    assert isinstance(op._device_result(None, encoded), rp.DecodeError)


def test_an_encoded_image_sent_to_another_process_goes_without_its_code_stream():
    import pickle

    made = EncodedImage(np.arange(4, dtype=np.uint8), 30, 20, (4, 5, 10, 8)).with_code_stream(lambda d, w: (d, w))
    assert made.code_stream[1] == (4, 5, 10, 8) and made.code_stream[0] is made.data
    sent = pickle.loads(pickle.dumps(made))
    assert sent.code_stream is None and (sent.width, sent.height, sent.window) == (30, 20, (4, 5, 10, 8))
    assert np.array_equal(sent.data, made.data)


@pytest.mark.gpu
@pytest.mark.skipif(not nvimgcodec_available(), reason="needs a CUDA GPU and nvImageCodec")
@pytest.mark.parametrize("decoder", ["image", "image_random_crop"])
def test_mixed_decoders_decode_on_the_gpu_close_to_pillow(jpeg_files, decoder):
    @rp.pipeline_def(batch_size=4, num_threads=2, seed=11)
    def pipe_def(device):
        jpegs, _ = fn.readers.file(files=jpeg_files[:8], name="Reader")
        return getattr(fn.decoders, decoder)(jpegs, device=device)

    with pipe_def("cpu", device_id=None) as cpu, pipe_def("mixed", device_id=0) as gpu:
        gpu.build()
        assert gpu._staged.deferred and gpu._staged.decode_plans[gpu._staged.host_nodes[1]].deferred
        for _ in range(2):
            (ref,), (got,) = cpu.run(), gpu.run()
            assert got.device == "gpu"
            got = got.as_cpu()
            for i in range(4):
                a, b = np.asarray(ref.at(i), np.int16), np.asarray(got.at(i), np.int16)
                assert a.shape == b.shape  # the same crop window, drawn from the header
                diff = np.abs(a - b)
                assert diff.mean() <= 3.0 and np.percentile(diff, 99) <= 16  # nvJPEG vs libjpeg-turbo rounding


def test_host_decode_deferred_encode_and_random_resized_crop_draw_the_same_window(jpeg_files):
    from raypipe.operators.random_resized_crop import RandomResizedCrop

    host, deferred = ImageRandomCropDecoder(device="mixed", op_id=3), _deferred(ImageRandomCropDecoder, op_id=3)
    resized = RandomResizedCrop(device="cpu", op_id=3, size=64)
    for i, path in enumerate(jpeg_files[:8]):
        data = np.fromfile(path, np.uint8)
        ctx = SampleContext(11, 2, i)
        encoded = deferred.run_sample([data], {}, ctx, DEFERRED)
        x, y, w, h = encoded.window
        crop = host.run_sample([data], {}, ctx)
        np.testing.assert_array_equal(crop, np.asarray(Image.open(path).convert("RGB"))[y : y + h, x : x + w])
        assert resized.window(encoded.width, encoded.height, ctx) == encoded.window


def test_a_deferred_chunk_gives_each_samples_own_header_and_window(jpeg_files, tmp_path):
    png = tmp_path / "small.png"
    Image.fromarray(np.zeros((30, 40, 3), np.uint8)).save(png)
    datas = [np.fromfile(path, np.uint8) for path in [*jpeg_files[:6], str(png)]]
    ctxs = [SampleContext(11, 0, i) for i in range(len(datas))]
    for op in (_deferred(ImageRandomCropDecoder), _deferred(ImageDecoder)):
        chunk = op.run_chunk([datas], {}, ctxs, DEFERRED)
        alone = [op.run_sample([data], {}, ctx, DEFERRED) for data, ctx in zip(datas, ctxs)]
        assert [(e.data is d, e.width, e.height, e.window) for e, d in zip(chunk, datas)] == [
            (True, e.width, e.height, e.window) for e in alone
        ]
        assert (chunk[-1].width, chunk[-1].height) == (40, 30)  # the PNG, through Pillow


def test_a_deferred_chunk_with_a_bad_header_raises_it(jpeg_files):
    cut = np.fromfile(jpeg_files[0], np.uint8)[:40]
    op = _deferred(ImageRandomCropDecoder)
    with pytest.raises(rp.DecodeError, match="truncated JPEG header: the data ends at byte 40"):
        op.run_chunk(
            [[np.fromfile(jpeg_files[1], np.uint8), cut]], {}, [SampleContext(11, 0, i) for i in range(2)], DEFERRED
        )
    assert (
        "truncated JPEG header"
        in _deferred(ImageDecoder, on_error="skip").run_sample([cut], {}, SampleContext(11, 0, 1), DEFERRED).reason
    )


def test_a_deferred_chunk_names_the_first_exif_orientation_once(rotated_files):
    op = _deferred(ImageRandomCropDecoder)
    datas = [np.fromfile(path, np.uint8) for path in rotated_files]
    ctxs = [SampleContext(11, 0, i) for i in range(3)]
    with pytest.warns(ExifOrientationWarning, match="sample 1 is a JPEG with EXIF orientation 6") as caught:
        op.run_chunk([datas], {}, ctxs, DEFERRED)
        op.run_chunk([datas], {}, ctxs, DEFERRED)
    assert sum(issubclass(w.category, ExifOrientationWarning) for w in caught) == 1


@pytest.mark.parametrize("op", ["decoders.image", "decoders.image_random_crop"])
def test_a_ycbcr_decode_is_refused_with_the_conversion_to_use(jpeg_files, op):
    @rp.pipeline_def(batch_size=2, num_threads=1)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        decode = fn.decoders.image if op == "decoders.image" else fn.decoders.image_random_crop
        return decode(jpegs, output_type=types.YCbCr)

    with pytest.raises(rp.ArgumentError, match=r"output_type must be types.RGB, BGR or GRAY.*color_space_conversion"):
        pipe().build()


#: a PNG holding every uint8 value (16 x 16, grey in three channels)
ALL_VALUES = np.arange(256, dtype=np.uint8).reshape(16, 16, 1).repeat(3, axis=2)


def _png(image: np.ndarray) -> np.ndarray:
    import io

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "PNG")
    return np.frombuffer(buffer.getvalue(), np.uint8)


def _decoded_as(module, dtype, device="cpu"):
    data = _png(ALL_VALUES)

    @module.pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=0)
    def pipe():
        encoded = module.fn.external_source(source=lambda: [data], batch=True)
        return module.fn.decoders.image(encoded, device=device, dtype=getattr(module.types, dtype))

    p = pipe()
    p.build()
    (out,) = p.run()
    return np.asarray(out.as_cpu()[0] if hasattr(out, "as_cpu") else out[0])


values = np.arange(256)
#: DALI's values for each dtype, as its CPU decoder gives them (measured in DALI 2.4)
DTYPE_VALUES = {
    "UINT8": values.astype(np.uint8),
    "FLOAT": values.astype(np.float32) * np.float32(1 / 255),
    "UINT16": (values * 257).astype(np.uint16),
    "INT16": np.round(values * 32767 / 255).astype(np.int16),
    "INT8": np.round(values * 127 / 255).astype(np.int8),
}


@pytest.mark.parametrize("device", ["cpu", "mixed"])
@pytest.mark.parametrize("dtype", [*DTYPE_VALUES, "INT32"])
def test_dtype_converts_over_the_types_range_as_dali(device, dtype):
    got = _decoded_as(rp, dtype, device)
    assert got.shape == (16, 16, 3) and got.dtype == rp.types.to_numpy_type(getattr(types, dtype))
    if dtype == "INT32":  # float32 arithmetic, saturated: 255 gives the maximum
        assert got[0, 0, 0] == 0 and got[15, 15, 0] == 2**31 - 1 and got[0, 1, 0] == 8421505
    else:
        np.testing.assert_array_equal(got[..., 0].ravel(), DTYPE_VALUES[dtype])
    dali = pytest.importorskip("nvidia.dali")
    np.testing.assert_array_equal(got, _decoded_as(dali, dtype))


def test_a_random_crop_with_a_dtype_is_resized_from_its_converted_window(jpeg_files):
    """The conversion follows the decoder, so the resize sees the converted window (no decode-time resize):
    the same as converting the uint8 window and resizing that as floats."""
    with random_crop(jpeg_files[:4], resize_to=(32, 24), dtype=types.FLOAT) as pipe:
        (floats,) = pipe.run()

    @rp.pipeline_def(batch_size=4, num_threads=2, seed=11)
    def converted_by_hand():
        jpegs, _ = fn.readers.file(files=jpeg_files[:4], name="Reader")
        window = fn.decoders.image_random_crop(jpegs)
        unit = fn.cast(window, dtype=types.FLOAT) * (1 / 255)
        return fn.resize(unit, resize_x=32, resize_y=24)

    with converted_by_hand() as pipe:
        (by_hand,) = pipe.run()
    for i in range(4):
        assert np.asarray(floats.at(i)).dtype == np.float32
        np.testing.assert_allclose(np.asarray(floats.at(i)), np.asarray(by_hand.at(i)), atol=1e-5)


def test_a_dtype_dali_decoders_do_not_give_is_refused(jpeg_files):
    with pytest.raises(rp.ArgumentError, match="decoders.image: dtype must be one of uint8, .* got float16"):
        decode(jpeg_files[:1], dtype=types.FLOAT16).build()


@pytest.mark.skipif(gpu_available(), reason="runs the GPU stage in the CUDA simulator, on a machine without a GPU")
def test_a_dtype_after_a_mixed_decoder_converts_the_gpu_batch_in_one_pass(monkeypatch, jpeg_files):
    """In the GPU stage (``device_id=0``, the simulator) the conversion takes the decoded batch whole (here
    one packed buffer of images of several sizes) and gives what the host gives."""
    monkeypatch.setenv("RAYPIPE_DEVICE", "simulator")
    calls = []
    compute = ConvertNorm.compute

    def counted(self, xp, inputs, args, ctx):
        calls.append(inputs[0].shape)
        return compute(self, xp, inputs, args, ctx)

    monkeypatch.setattr(ConvertNorm, "compute", counted)
    batches = {}
    for device_id in (None, 0):

        @rp.pipeline_def(batch_size=4, num_threads=1, device_id=device_id, seed=0)
        def pipe():
            jpegs, _ = fn.readers.file(files=jpeg_files[:4])
            return fn.decoders.image(jpegs, device="mixed", dtype=types.FLOAT)

        with pipe() as p:
            (out,) = p.run()
            batches[device_id] = [np.asarray(out.as_cpu().at(i)) for i in range(4)]
    assert any(len(shape) == 1 for shape in calls)  # the GPU stage's packed batch, converted in one pass
    for host, device in zip(batches[None], batches[0], strict=True):
        np.testing.assert_array_equal(host, device)
