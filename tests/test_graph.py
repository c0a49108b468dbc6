"""Graph definition and build-time checks: device order, pruning, argument errors, both API styles."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

import raypipe as rp
from raypipe import fn, ops
from raypipe.cpu_stage import CpuStage
from raypipe.decode_plan import DecodePlan
from raypipe.graph import Graph, defining, stage
from raypipe.keyed_random import SampleContext
from raypipe.operators.decoders import EncodedImage


def _build(graph_fn, **kwargs):
    pipe = rp.pipeline_def(graph_fn, batch_size=2, num_threads=1, seed=1)(**kwargs)
    pipe.build()
    return pipe


def test_cpu_operator_cannot_consume_gpu_data(jpeg_files):
    def graph(files):
        jpegs, _ = fn.readers.file(files=files)
        images = fn.decoders.image(jpegs, device="mixed")
        return fn.python_function(images, function=lambda a: a, device="cpu", name="late_cpu")

    with pytest.raises(rp.PipelineDefinitionError, match=r"'late_cpu'.*device 'cpu'.*'decoders.image'#1.*mixed"):
        _build(graph, files=jpeg_files[:2])


def test_a_cpu_operator_after_gpu_is_told_to_move_the_gpu_call(jpeg_files):
    def graph(files):
        jpegs, _ = fn.readers.file(files=files, name="Reader")
        return fn.decoders.image(jpegs.gpu())

    with pytest.raises(
        rp.PipelineDefinitionError,
        match=r"'decoders.image'#\d \(device 'cpu'\) cannot consume the output of 'Reader' moved to the GPU by "
        r"\.gpu\(\).*call \.gpu\(\) after it",
    ):
        _build(graph, files=jpeg_files[:2])


def test_cpu_of_host_data_is_the_data_and_of_gpu_data_is_refused(jpeg_files):
    """DALI's ``.cpu()``: scripts call it on host data (an argument made on the host) as a no-op."""

    def graph(files):
        jpegs, labels = fn.readers.file(files=files)
        angle = fn.random.uniform(range=(0.0, 10.0))
        assert angle.cpu() is angle
        return fn.rotate(fn.decoders.image(jpegs), angle=angle.cpu()), labels

    _build(graph, files=jpeg_files[:2])

    def back(files):
        jpegs, _ = fn.readers.file(files=files)
        return fn.decoders.image(jpegs, device="mixed").cpu()

    with pytest.raises(rp.PipelineDefinitionError, match=r"\.cpu\(\): GPU data cannot go back to the host"):
        _build(back, files=jpeg_files[:2])


def test_per_sample_argument_must_come_from_cpu(jpeg_files):
    def graph(files):
        jpegs, _ = fn.readers.file(files=files)
        images = fn.decoders.image(jpegs, device="mixed")
        coin = fn.random.coin_flip().gpu()
        return fn.flip(images, horizontal=coin)

    with pytest.raises(rp.PipelineDefinitionError, match="argument 'horizontal'.*per-sample arguments"):
        _build(graph, files=jpeg_files[:2])


def test_unused_branches_are_pruned(jpeg_files):
    calls = []

    def exploding(a):
        calls.append(1)
        raise RuntimeError("must never run")

    def graph(files):
        jpegs, labels = fn.readers.file(files=files)
        fn.python_function(jpegs, function=exploding)
        return labels

    with _build(graph, files=jpeg_files[:4]) as pipe:
        (labels,) = pipe.run()
    assert np.asarray(labels).ravel().tolist() == [0, 1]
    assert calls == []


def test_unknown_operator_and_argument_errors(jpeg_files):
    def unknown_op(files):
        jpegs, _ = fn.readers.file(files=files)
        return fn.no_such_operator(jpegs)

    with pytest.raises(AttributeError, match="fn.no_such_operator"):
        _build(unknown_op, files=jpeg_files[:2])

    def unknown_arg(files):
        jpegs, _ = fn.readers.file(files=files)
        return fn.decoders.image(jpegs, colourspace="RGB")

    with pytest.raises(rp.ArgumentError, match="decoders.image.*colourspace"):
        _build(unknown_arg, files=jpeg_files[:2])

    def misspelt_arg(files):
        jpegs, _ = fn.readers.file(files=files)
        return fn.resize(fn.decoders.image(jpegs), resize_xx=10)

    with pytest.raises(
        rp.ArgumentError, match=r"^resize: unexpected keyword argument 'resize_xx'; did you mean 'resize_x'"
    ):
        _build(misspelt_arg, files=jpeg_files[:2])

    def bad_device(files):
        jpegs, _ = fn.readers.file(files=files)
        return fn.decoders.image(jpegs, device="gpu")

    with pytest.raises(rp.ArgumentError, match=r"decoders.image: cannot run on device 'gpu'"):
        _build(bad_device, files=jpeg_files[:2])


def test_operators_outside_a_pipeline_are_an_error():
    with pytest.raises(rp.PipelineDefinitionError, match="outside a pipeline definition"):
        fn.random.coin_flip()


def _two_readers(files_a, files_b, order_a=None, order_b=None):
    _, a = fn.readers.file(files=files_a, name="A", **(order_a or {}))
    _, b = fn.readers.file(files=files_b, name="B", **(order_b or {}))
    return a, b


def test_several_readers_are_staged_in_graph_order(jpeg_files):
    staged = _staged(lambda: _two_readers(jpeg_files[:2], jpeg_files[2:4]))
    assert [r.label for r in staged.readers] == ["'A'", "'B'"]
    assert staged.reader is staged.readers[0], "the first reader decides the order"
    assert _staged(lambda: [fn.random.coin_flip()]).reader is None


@pytest.mark.parametrize(
    "order_a, order_b, files_b, message",
    [
        ({}, {}, 3, "dataset length is 2 in 'A' but 3 in 'B'"),
        ({"random_shuffle": True, "seed": 1}, {}, 2, "random_shuffle is True in 'A' but False in 'B'"),
        ({"random_shuffle": True, "seed": 1}, {"random_shuffle": True, "seed": 2}, 2, "seed is 1 in 'A' but 2 in 'B'"),
        ({"random_shuffle": True}, {"random_shuffle": True, "initial_fill": 8}, 2, "initial_fill is 1024 in 'A'"),
        ({"shard_id": 1, "num_shards": 2}, {"num_shards": 2}, 2, "shard_id is 1 in 'A' but 0 in 'B'"),
        ({"pad_last_batch": True}, {}, 2, "pad_last_batch is True in 'A' but False in 'B'"),
        (
            {"shuffle_after_epoch": True},
            {"shuffle_after_epoch": True, "shuffle_after_epoch_seed": 4},
            2,
            "shuffle_after_epoch_seed is 524287 in .A. but 4",
        ),
        ({"stick_to_shard": True}, {}, 2, "stick_to_shard is True in 'A' but False in 'B'"),
    ],
)
def test_readers_out_of_step_are_refused_when_built(jpeg_files, order_a, order_b, files_b, message):
    with pytest.raises(rp.PipelineDefinitionError, match=f"readers 'A' and 'B' cannot read in step: {message}"):
        _build(
            _two_readers, files_a=jpeg_files[:2], files_b=jpeg_files[2 : 2 + files_b], order_a=order_a, order_b=order_b
        )


def test_a_file_reader_and_a_container_reader_shuffle_out_of_step(jpeg_files, tmp_path):
    """DALI's file reader shuffles its listing before its buffer, a container reader only passes
    its records through the buffer: shuffled, they cannot pair samples."""
    import tarfile

    tar = tmp_path / "two.tar"
    with tarfile.open(tar, "w") as out:
        for i, path in enumerate(jpeg_files[:2]):
            out.add(path, arcname=f"{i}.jpg")

    def graph():
        _, a = fn.readers.file(files=jpeg_files[:2], name="A", random_shuffle=True, seed=1)
        b = fn.readers.webdataset(paths=[str(tar)], ext=["jpg"], name="B", random_shuffle=True, seed=1)
        return a, b

    with pytest.raises(rp.PipelineDefinitionError, match="shuffled_listing is True in 'A' but False in 'B'"):
        _build(graph)


def test_readers_differing_only_where_no_shuffle_reads_them_are_in_step(jpeg_files):
    """``seed`` and ``initial_fill`` order nothing without ``random_shuffle``."""
    pipe = _build(_two_readers, files_a=jpeg_files[:2], files_b=jpeg_files[2:4], order_a={"seed": 1, "initial_fill": 4})
    assert pipe.epoch_size() == {"A": 2, "B": 2}


class ClassStylePipe(rp.Pipeline):
    def __init__(self, files, **kwargs):
        super().__init__(**kwargs)
        self.reader = ops.readers.File(files=files, name="Reader")
        self.decode = ops.decoders.Image(device="mixed")
        self.coin = ops.random.CoinFlip(probability=0.5)

    def define_graph(self):
        jpegs, labels = self.reader()
        return self.decode(jpegs), labels, self.coin()


@pytest.mark.parametrize("style", ["class", "function"])
def test_class_and_function_styles_agree(jpeg_files, style):
    files = jpeg_files[:4]

    @rp.pipeline_def(batch_size=99, num_threads=1, seed=5)
    def function_pipe(files):
        jpegs, labels = fn.readers.file(files=files, name="Reader")
        return fn.decoders.image(jpegs, device="mixed"), labels, fn.random.coin_flip(probability=0.5)

    reference = ClassStylePipe(files, batch_size=4, num_threads=2, seed=5)
    pipe = reference if style == "class" else function_pipe(files, batch_size=4, num_threads=2)
    with reference, pipe:
        assert pipe.batch_size == 4 and pipe.epoch_size("Reader") == 4
        ref = reference.run() if pipe is not reference else None
        images, labels, coins = pipe.run()
        assert images.device == "gpu" and labels.device == "cpu" and images.layout() == "HWC"
        assert np.asarray(labels).ravel().tolist() == [0, 1, 2, 3]
        if ref is not None:
            for a, b in zip(ref, (images, labels, coins)):
                for i in range(4):
                    assert np.array_equal(np.asarray(a.as_cpu().at(i)), np.asarray(b.as_cpu().at(i)))


def test_none_is_an_argument_not_given_as_in_dali(jpeg_files):
    """``shard_id=None, num_shards=None`` (a script's unset rank) reads unsharded; ``None`` in an ops
    call keeps the value given at construction."""
    files = jpeg_files[:5]
    crop = ops.Crop(crop=(8, 6))

    @rp.pipeline_def(batch_size=5, num_threads=1, seed=5)
    def pipe():
        jpegs, labels = fn.readers.file(files=files, shard_id=None, num_shards=None, random_shuffle=None, name="R")
        images = fn.decoders.image(jpegs)
        return crop(images, crop=None), fn.resize(images, resize_x=10, resize_y=None, mode=None), labels

    with pipe() as p:
        cropped, resized, labels = p.run()
        assert p.epoch_size("R") == 5 and np.asarray(labels).ravel().tolist() == [0, 1, 2, 3, 4]
        assert all(cropped.at(i).shape == (8, 6, 3) for i in range(5))
        for i in range(5):
            with Image.open(files[i]) as image:
                width, height = image.size
            assert resized.at(i).shape == (round(height * 10 / width), 10, 3)


def test_pipeline_arguments_are_validated_before_anything_runs():
    @rp.pipeline_def(batch_size=2)
    def graph(files):
        return fn.readers.file(files=files)[1]

    with pytest.raises(rp.ArgumentError, match="batch_size must be a positive int, got 0"):
        graph(["x.jpg"], batch_size=0)
    with pytest.raises(rp.ArgumentError, match="num_threads"):
        graph(["x.jpg"], num_threads=-1)
    with pytest.raises(rp.ArgumentError, match="cpu_size"):
        graph(["x.jpg"], prefetch_queue_depth={"gpu_size": 2})
    with pytest.raises(rp.ArgumentError, match="unexpected keyword argument 'root'"):
        graph(["x.jpg"], root="x")
    with pytest.raises(rp.ArgumentError, match="unknown pipeline arguments"):
        rp.pipeline_def(batchsize=3)


def _staged(graph_fn, **stage_args):
    graph = Graph()
    with defining(graph):
        outputs = graph_fn()
    return stage(graph, outputs, **stage_args)


def _recipe(files):
    def graph_fn():
        jpegs, labels = fn.readers.file(files=files)
        images = fn.decoders.image_random_crop(jpegs, device="mixed")
        images = fn.resize(images, resize_x=64, resize_y=64)
        images = fn.crop_mirror_normalize(images, mirror=fn.random.coin_flip())
        return images, labels

    return graph_fn


def _names(nodes):
    return [n.op.schema.name for n in nodes]


def test_on_a_gpu_the_graph_splits_as_written(jpeg_files):
    staged = _staged(_recipe(jpeg_files[:2]), on_gpu=True)
    assert _names(staged.host_nodes) == ["readers.file", "decoders.image_random_crop", "random.coin_flip"]
    assert _names(staged.gpu_nodes) == ["resize", "crop_mirror_normalize"]
    assert [d.producer.op.schema.name for d in staged.to_device] == ["decoders.image_random_crop"]
    plan = staged.decode_plans[staged.host_nodes[1]]
    assert plan.target_size == (64, 64) and not plan.resize_on_host  # DCT scaling only
    assert staged.deferred == [] and not plan.deferred


def test_nvimgcodec_defers_mixed_decoders_to_the_mixed_stage(jpeg_files):
    staged = _staged(_recipe(jpeg_files[:2]), on_gpu=True, decode_on_gpu=True)
    assert staged.deferred == [staged.host_nodes[1].outputs[0]] and staged.decode_plans[staged.host_nodes[1]].deferred
    without_gpu = _staged(_recipe(jpeg_files[:2]), on_gpu=False, decode_on_gpu=True)
    assert without_gpu.deferred == [] and not without_gpu.decode_plans[without_gpu.host_nodes[1]].deferred


def test_without_a_gpu_everything_runs_on_the_host_fused_like_cpu(jpeg_files):
    staged = _staged(_recipe(jpeg_files[:2]), on_gpu=False)
    assert _names(staged.host_nodes) == [
        "readers.file",
        "decoders.image_random_crop",
        "resize",
        "random.coin_flip",
        "crop_mirror_normalize",
    ]
    assert staged.gpu_nodes == [] and staged.to_device == []
    assert staged.host_results == staged.outputs
    plan = staged.decode_plans[staged.host_nodes[1]]
    assert plan.target_size == (64, 64) and plan.resize_on_host  # decode+crop+resize in one Pillow call


def test_staging_a_graph_twice_records_each_split_and_changes_no_operator(jpeg_files):
    graph = Graph()
    with defining(graph):
        outputs = _recipe(jpeg_files[:2])()
    graph.nodes[0].op.prepare()  # the reader lists its files, as a pipeline's build does
    before = [dict(vars(node.op)) for node in graph.nodes]
    deferred = stage(graph, outputs, on_gpu=True, decode_on_gpu=True)
    on_host = stage(graph, outputs, on_gpu=False)
    after = [dict(vars(node.op)) for node in graph.nodes]
    assert [sorted(d) for d in after] == [sorted(d) for d in before], "staging adds no attribute"
    assert all(a[k] is b[k] for a, b in zip(after, before) for k in a), "staging sets no attribute"
    decoder = graph.nodes[1]
    assert deferred.decode_plans == {decoder: DecodePlan(deferred=True, target_size=(64, 64))}
    assert on_host.decode_plans == {decoder: DecodePlan(target_size=(64, 64), resize_on_host=True)}
    # each staging runs its own way, whatever the other one decided
    ctx = SampleContext(1, 0, 1)
    assert isinstance(CpuStage(deferred, seed=1).run_sample(ctx, 0, None)[decoder.outputs[0]], EncodedImage)
    images = CpuStage(on_host, seed=1).run_sample(ctx, 0, None)[outputs[0]]
    alone = _staged(_recipe(jpeg_files[:2]), on_gpu=False)
    alone.reader.op.prepare()
    np.testing.assert_array_equal(images, CpuStage(alone, seed=1).run_sample(ctx, 0, None)[alone.outputs[0]])


def test_without_a_gpu_batch_functions_and_their_consumers_stay_batch_steps(jpeg_files):
    def graph_fn():
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        images = fn.decoders.image(jpegs, device="mixed")
        batch = fn.python_function(images, function=lambda b: b, device="gpu")
        return fn.resize(batch, resize_x=8, resize_y=8), fn.resize(images, resize_x=4, resize_y=4)

    staged = _staged(graph_fn, on_gpu=False)
    assert _names(staged.gpu_nodes) == ["python_function", "resize"]
    assert _names(staged.host_nodes) == ["readers.file", "decoders.image", "resize"]
    assert [d.producer.op.schema.name for d in staged.to_device] == ["decoders.image"]
    assert staged.host_results[-1] is staged.to_device[0]


def _multi_output_layouts(module) -> list[str]:
    fn = module.fn

    @module.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=1)
    def pipe():
        image = fn.external_source(source=lambda: [np.zeros((20, 30, 3), np.uint8)] * 2, layout="HWC")
        boxes = fn.external_source(source=lambda: [np.array([[0.1, 0.1, 0.5, 0.5]], np.float32)] * 2)
        labels = fn.external_source(source=lambda: [np.array([1], np.int32)] * 2)
        mask = fn.external_source(source=lambda: [np.ones((20, 30), np.uint8)] * 2, layout="HW")
        return (
            *fn.ssd_random_crop(image, boxes, labels),
            *fn.random_bbox_crop(boxes, labels, bbox_layout="xyXY"),
            *fn.box_encoder(boxes, labels, anchors=[0.0, 0.0, 1.0, 1.0]),
            *fn.segmentation.random_object_bbox(mask),
        )

    p = pipe()
    p.build()
    return [out.layout() for out in p.run()]


def test_the_other_outputs_of_an_operator_have_no_layout_as_in_dali():
    """An image operator's boxes and labels outputs have no layout (not the image's ``HWC``)."""
    assert _multi_output_layouts(rp) == ["HWC"] + [""] * 10
    dali = pytest.importorskip("nvidia.dali")
    assert _multi_output_layouts(rp) == _multi_output_layouts(dali)


def _node_methods(module, files):
    fn, types = module.fn, module.types

    @module.pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=files)
        x = fn.external_source(source=lambda: [np.zeros((3, 5), np.float32), np.zeros((1, 5), np.float32)], layout="AB")
        return x.shape(), x.shape(dtype=types.INT32), x.property("layout"), jpegs.source_info()

    p = pipe()
    p.build()
    return [[np.asarray(out.at(i)) for i in range(2)] for out in p.run()]


def test_data_node_methods_are_dalis(jpeg_files):
    """``node.shape()``, ``node.property(key)`` and ``node.source_info()``, as DALI's DataNode has them."""
    shapes, shapes32, layouts, sources = _node_methods(rp, jpeg_files[:2])
    assert [s.tolist() for s in shapes] == [[3, 5], [1, 5]] and shapes[0].dtype == np.int64
    assert shapes32[0].dtype == np.int32 and bytes(layouts[0]) == b"AB"
    assert [bytes(s).decode() for s in sources] == jpeg_files[:2]
    with pytest.raises(rp.PipelineDefinitionError, match=r"\.shape\(\): GPU data cannot give host data"):

        @rp.pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def gpu_shape():
            return fn.external_source(source=lambda: [np.zeros(3)]).gpu().shape()

        gpu_shape().build()
    dali = pytest.importorskip("nvidia.dali")
    for mine, theirs in zip(_node_methods(rp, jpeg_files[:2]), _node_methods(dali, jpeg_files[:2]), strict=True):
        for m, t in zip(mine, theirs, strict=True):
            assert m.dtype == t.dtype
            np.testing.assert_array_equal(m, t)
