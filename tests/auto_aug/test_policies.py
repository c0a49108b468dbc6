"""The policies of :mod:`raypipe.auto_aug`: what each sample gets, that it is the same wherever and
however the sample is computed, and the errors of a wrong call."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.auto_aug import augmentations as a
from raypipe.auto_aug import auto_augment, rand_augment, trivial_augment
from raypipe.auto_aug.core import Policy, augmentation
from raypipe.backend import gpu_available
from raypipe.errors import ArgumentError, PipelineDefinitionError

RNG = np.random.default_rng(3)
IMAGES = [RNG.integers(0, 256, (20 + i % 3, 24, 3), dtype=np.uint8) for i in range(16)]
SUITE = [
    a.rotate.augmentation((0, 30), True),
    a.brightness.augmentation((0, 0.9), True, a.shift_enhance_range),
    a.posterize.augmentation((8, 4), False, a.poster_mask_uint8),
    a.solarize.augmentation((256, 0)),
    a.invert,
    a.identity,
]


def _run(build, samples=IMAGES, batch_size=None, num_threads=1, device_id=None, seed=5) -> list[np.ndarray]:
    """``build(images)`` on ``samples`` (batches of ``batch_size``), every output sample in order."""
    size = batch_size or len(samples)
    batches = [samples[i : i + size] for i in range(0, len(samples), size)]
    feed = iter(batches)

    @rp.pipeline_def(batch_size=size, num_threads=num_threads, device_id=device_id, seed=seed, enable_conditionals=True)
    def pipe():
        images = fn.external_source(source=lambda: next(feed), layout="HWC", batch=True)
        return build(images)

    outs = []
    with pipe() as p:
        for _ in batches:
            (out,) = p.run()
            outs += [np.asarray(out.as_cpu().at(i)) for i in range(len(out))]
    return outs


def _candidates(augmentations, m: int, bins: int) -> list[list[np.ndarray]]:
    """Per sample, its image through each augmentation with each sign."""
    per = []
    for aug in augmentations:
        signs = [False, True] if aug.randomly_negate else [False]
        for negated in signs:
            fixed = aug
            if aug.mag_range is not None:
                low, high = aug.mag_range
                fixed = aug.augmentation(mag_range=(-low, -high) if negated else (low, high), randomly_negate=False)
            per.append(_run(lambda x, f=fixed: f(x, magnitude_bin=m, num_magnitude_bins=bins)))
    return [list(c) for c in zip(*per)]


def _which(got: np.ndarray, candidates: list[np.ndarray]) -> int:
    matches = [i for i, c in enumerate(candidates) if c.shape == got.shape and np.array_equal(c, got)]
    assert matches, "the output is one augmentation of its input"
    return matches[0]


def test_rand_augment_with_one_operation_gives_each_sample_one_augmentation_of_the_suite():
    got = _run(lambda x: rand_augment.apply_rand_augment(SUITE, x, n=1, m=6, num_magnitude_bins=11))
    candidates = _candidates(SUITE, 6, 11)
    chosen = [_which(g, c) for g, c in zip(got, candidates)]
    assert len(set(chosen)) >= 4, f"16 samples draw several of the suite's 9 variants, got {chosen}"


def test_the_same_samples_get_the_same_augmentations_in_any_batching_threads_or_stage():
    """Keyed draws: batches of 16 or 4, 1 or 3 threads, per sample on the host or per batch as the
    GPU stage runs it (``RAYPIPE_DEVICE=simulator``: grouped by augmentation), the same results."""

    def build(x):
        return rand_augment.rand_augment(x, n=2, m=9, fill_value=None)

    whole = _run(build)
    assert any(not np.array_equal(g, i) for g, i in zip(whole, IMAGES))
    for kwargs in ({"batch_size": 4}, {"num_threads": 3}):
        assert all(np.array_equal(x, y) for x, y in zip(whole, _run(build, **kwargs))), kwargs
    assert not all(np.array_equal(x, y) for x, y in zip(whole, _run(build, seed=6))), "another seed, other draws"


def test_the_gpu_stage_groups_samples_by_augmentation_with_the_host_results(monkeypatch):
    from raypipe.kernels.launch import simulator_enabled

    if not simulator_enabled():
        pytest.skip("the simulator runs the GPU stage where no GPU is usable")

    def build(x):
        return trivial_augment.trivial_augment_wide(x.gpu(), num_magnitude_bins=11, fill_value=None, seed=9)

    from raypipe.subgraph import Subgraph

    on_host = _run(build)
    groups = []
    run_batch = Subgraph.run_batch

    def spy(self, xp, values, ctxs):
        groups.append(len(ctxs))
        return run_batch(self, xp, values, ctxs)

    monkeypatch.setattr(Subgraph, "run_batch", spy)
    monkeypatch.setenv("RAYPIPE_DEVICE", "simulator")
    staged = _run(build, device_id=0)
    assert sum(groups) == len(IMAGES) and 1 < len(groups) < len(IMAGES), "one call per augmentation drawn"
    for x, y in zip(on_host, staged):
        assert x.shape == y.shape and np.abs(x.astype(int) - y.astype(int)).max() <= 1


def test_auto_augment_policies_run_on_images_with_and_without_shapes():
    for policy in ("image_net", "reduced_image_net", "svhn", "reduced_cifar10"):
        shape = None if policy == "reduced_image_net" else (21, 24)
        outs = _run(lambda x, p=policy, s=shape: auto_augment.auto_augment(x, p, shape=s))
        assert [o.shape for o in outs] == [i.shape for i in IMAGES] and all(o.dtype == np.uint8 for o in outs)
        assert any(not np.array_equal(o, i) for o, i in zip(outs, IMAGES)), policy


def test_shapes_per_sample_scale_the_translations():
    """``shape`` from the data (``fn.shapes``, HWC): each sample's translation is relative to its own size."""
    translate = [a.translate_x.augmentation((0.5, 0.5), False)]

    def per_sample(x):
        return rand_augment.apply_rand_augment(translate, x, n=1, m=0, num_magnitude_bins=1, shape=fn.shapes(x))

    got = _run(per_sample)
    for image, out in zip(IMAGES, got):
        fixed = _run(
            lambda x, s=image.shape[:2]: rand_augment.apply_rand_augment(
                translate, x, n=1, m=0, num_magnitude_bins=1, shape=s
            ),
            samples=[image],
        )[0]
        assert np.array_equal(out, fixed)
        assert np.array_equal(out[:, 12:], image[:, :12]), "shifted by half of 24 pixels"


def test_a_custom_augmentation_written_with_operators_runs_in_a_policy():
    @augmentation(mag_range=(0, 100), randomly_negate=False)
    def darken(data, amount):
        return fn.cast_like(fn.cast(data, dtype=rp.types.FLOAT) - amount, data)

    policy = Policy("Darken", 3, [[(darken, 1.0, 2)]])
    got = _run(lambda x: auto_augment.apply_auto_augment(policy, x))
    for out, image in zip(got, IMAGES):
        assert np.array_equal(out, np.clip(image.astype(int) - 100, 0, 255).astype(np.uint8))


def test_n_zero_warns_and_returns_the_input():
    with pytest.warns(UserWarning, match="n=0"):
        got = _run(lambda x: rand_augment.rand_augment(x, n=0, m=3))
    assert all(np.array_equal(o, i) for o, i in zip(got, IMAGES))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda x: rand_augment.rand_augment(x, n=-1, m=3), "n .* non-negative int"),
        (lambda x: rand_augment.rand_augment(x, n=2, m=31), r"m .* \[0, 30\]"),
        (lambda x: rand_augment.rand_augment(x, n=2, m=3, excluded=["blur"]), "'blur'.* suite does not have"),
        (lambda x: rand_augment.rand_augment(x, n=2, m=3, max_translate_rel=0.2), "max_translate_rel .* give shape"),
        (
            lambda x: rand_augment.apply_rand_augment([a.translate_x], x, n=1, m=3),
            r"'translate_x' needs the images' shape",
        ),
        (lambda x: rand_augment.apply_rand_augment(SUITE, x, n=1, m=3, colour=1), r"no augmentation takes .*'colour'"),
        (lambda x: trivial_augment.trivial_augment_wide(x, num_magnitude_bins=0), "positive int"),
        (lambda x: auto_augment.auto_augment(x, "cifar"), "policy_name must be one of"),
        (lambda x: auto_augment.auto_augment(x, "reduced_image_net", shape=(2, 2)), "no translations; shape"),
        (lambda x: a.rotate(x, magnitude_bin=fn.random.uniform(values=[1, 2]), num_magnitude_bins=3), "an int here"),
        (lambda x: a.rotate(x, magnitude_bin=4, num_magnitude_bins=3), r"\[0, 2\]"),
    ],
)
def test_wrong_calls_raise_naming_the_argument(build, message):
    with pytest.raises(ArgumentError, match=message):
        _run(build)


@pytest.mark.parametrize(
    "policy",
    [
        lambda x: rand_augment.rand_augment(x, n=2, m=5),
        lambda x: trivial_augment.trivial_augment_wide(x),
        lambda x: auto_augment.auto_augment_image_net(x),
    ],
)
def test_the_suites_take_uint8_images_and_name_another_type(policy):
    floats = [image.astype(np.float32) / 255 for image in IMAGES[:4]]
    with pytest.raises(Exception, match=r"takes uint8 images .* got float32"):
        _run(policy, samples=floats)


def test_a_custom_suite_takes_what_its_augmentations_take():
    floats = [image.astype(np.float32) for image in IMAGES[:4]]
    got = _run(lambda x: rand_augment.apply_rand_augment([a.identity], x, n=1, m=0), samples=floats)
    assert all(np.array_equal(g, f) for g, f in zip(got, floats))


def test_wrong_policies_and_augmentations_raise_when_made():
    with pytest.raises(ArgumentError, match="needs a magnitude bin|magnitude bin"):
        Policy("P", 5, [[(a.rotate, 0.5, None)]])
    with pytest.raises(ArgumentError, match=r"\[0, 4\]"):
        Policy("P", 5, [[(a.rotate, 0.5, 5)]])
    with pytest.raises(ArgumentError, match="not an Augmentation"):
        Policy("P", 5, [[(lambda x, p: x, 0.5, 1)]])
    with pytest.raises(ArgumentError, match="first two"):
        augmentation(lambda data: data)
    with pytest.raises(ArgumentError, match="applied to the augmentation 'rotate'"):
        augmentation(a.rotate)


def test_an_augmentation_that_reads_data_or_changes_the_layout_is_refused():
    @augmentation
    def reads(data, _):
        return fn.external_source(source=lambda: IMAGES, batch=True)

    @augmentation
    def planar(data, _):
        return fn.transpose(data, perm=[2, 0, 1])

    with pytest.raises(PipelineDefinitionError, match="makes data of its own"):
        _run(lambda x: rand_augment.apply_rand_augment([reads], x, n=1, m=0, num_magnitude_bins=1))
    with pytest.raises(Exception, match="must keep its input's layout"):
        _run(lambda x: rand_augment.apply_rand_augment([planar], x, n=1, m=0, num_magnitude_bins=1))


def test_the_device_report_judges_a_policy_by_the_operators_inside(monkeypatch):
    """Staged as on a GPU: a policy whose augmentations all take whole groups is batched; one with
    an operator that runs sample by sample inside (``equalize``) is reported so."""
    from raypipe.kernels.launch import simulator_enabled

    if not simulator_enabled():
        pytest.skip("the simulator stages as on a GPU where no GPU is usable")
    monkeypatch.setenv("RAYPIPE_DEVICE", "simulator")
    paths = {}
    for name, suite in (("invert", [a.brightness, a.invert]), ("equalize", [a.brightness, a.equalize])):

        @rp.pipeline_def(batch_size=4, num_threads=1, device_id=0, seed=1)
        def pipe(suite=suite):
            images = fn.external_source(source=lambda: IMAGES[:4], layout="HWC", batch=True, device="gpu")
            return rand_augment.apply_rand_augment(suite, images, n=1, m=0, num_magnitude_bins=1)

        with pipe() as p:
            paths[name] = next(v for k, v in p.device_report()["operators"].items() if "_augment_select" in k)
    assert paths == {"invert": "simulator", "equalize": "host"}


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_each_policy_gives_the_host_results():
    """On cupy, the samples that drew an augmentation go through it together: the host's values
    within one grey level (float rounding on another device)."""
    for build in (
        lambda x: auto_augment.auto_augment_image_net(x.gpu(), shape=(21, 24), seed=2),
        lambda x: rand_augment.rand_augment(x.gpu(), n=2, m=9, fill_value=None, seed=2),
        lambda x: trivial_augment.trivial_augment_wide(x.gpu(), seed=2),
    ):
        for host, device in zip(_run(build), _run(build, device_id=0)):
            assert host.shape == device.shape and np.abs(host.astype(int) - device.astype(int)).max() <= 1
