"""DALI's names: ``ops`` classes old and new, ``fn`` aliases, ``types`` members and interpolation
types, checked on real pipelines and, where DALI is installed, against DALI's own names."""

from __future__ import annotations

import importlib
import pickle
import re

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn, ops, types
from raypipe.graph import Graph, defining
from raypipe.operator import DEPRECATED_EXPERIMENTAL, EXPERIMENTAL, OLD_NAMES, registry
from raypipe.ops import class_name, factory

OLD_AND_NEW = [
    ("FileReader", "readers", "File"),
    ("CaffeReader", "readers", "Caffe"),
    ("Caffe2Reader", "readers", "Caffe2"),
    ("TFRecordReader", "readers", "TFRecord"),
    ("MXNetReader", "readers", "MXNet"),
    ("NumpyReader", "readers", "Numpy"),
    ("ImageDecoder", "decoders", "Image"),
    ("ImageDecoderRandomCrop", "decoders", "ImageRandomCrop"),
    ("ImageDecoderCrop", "decoders", "ImageCrop"),
    ("ImageDecoderSlice", "decoders", "ImageSlice"),
    ("CoinFlip", "random", "CoinFlip"),
    ("Uniform", "random", "Uniform"),
    ("NormalDistribution", "random", "Normal"),
    # the decoders' names before DALI 1.0 (DALI no longer has them)
    *[
        (f"{family}{kind}", "decoders", f"Image{kind}")
        for family in ("nvJPEGDecoder", "HostDecoder")
        for kind in ("", "Crop", "RandomCrop", "Slice")
    ],
]


@pytest.mark.parametrize("old, module, new", OLD_AND_NEW)
def test_old_and_new_ops_names_are_one_class_per_operator(old, module, new):
    current = getattr(getattr(ops, module), new)
    assert getattr(ops, old) is getattr(ops, old)
    assert current is getattr(getattr(ops, module), new)
    assert getattr(ops, old) is current
    assert current.__name__ == new and current.__qualname__ == f"{module}.{new}"
    assert old in dir(ops) and new in dir(getattr(ops, module))


def test_private_and_unknown_names_are_not_operators():
    assert "Transfer" not in dir(ops)
    with pytest.raises(AttributeError, match="ops.Transfer"):
        ops.Transfer  # noqa: B018
    with pytest.raises(AttributeError, match="ops.readers.Nope"):
        ops.readers.Nope  # noqa: B018


class OldNames(rp.Pipeline):
    """A DALI class-style training input written with the deprecated names DALI still ships."""

    def __init__(self, files, **kwargs):
        super().__init__(**kwargs)
        self.reader = ops.FileReader(files=files, random_shuffle=True, name="Reader")
        self.decode = ops.ImageDecoder(device="cpu", output_type=types.RGB)
        self.crop = ops.ImageDecoderRandomCrop(device="cpu")
        self.resize = ops.RandomResizedCrop(size=32, interp_type=types.INTERP_LINEAR)
        self.coin = ops.CoinFlip(probability=1.0)
        self.uniform = ops.Uniform(range=[2.0, 3.0])

    def define_graph(self):
        jpegs, labels = self.reader()
        return self.resize(self.decode(jpegs)), self.crop(jpegs), labels, self.coin(), self.uniform()


class NewNames(OldNames):
    def __init__(self, files, **kwargs):
        rp.Pipeline.__init__(self, **kwargs)
        self.reader = ops.readers.File(files=files, random_shuffle=True, name="Reader")
        self.decode = ops.decoders.Image(device="cpu", output_type=types.RGB)
        self.crop = ops.decoders.ImageRandomCrop(device="cpu")
        self.resize = ops.RandomResizedCrop(size=32, interp_type=types.INTERP_LINEAR)
        self.coin = ops.random.CoinFlip(probability=1.0)
        self.uniform = ops.random.Uniform(range=[2.0, 3.0])


def _batches(pipe, count=3):
    with pipe:
        return [[[np.asarray(s).tobytes() for s in out] for out in pipe.run()] for _ in range(count)]


def test_old_names_build_the_same_pipeline_as_new_names(jpeg_files):
    old = OldNames(jpeg_files[:8], batch_size=4, num_threads=1, seed=3)
    new = NewNames(jpeg_files[:8], batch_size=4, num_threads=1, seed=3)
    with old:
        images, crops, _, coins, uniforms = old.run()
        assert np.asarray(images).shape == (4, 32, 32, 3) and crops.layout() == "HWC"
        assert np.asarray(coins).ravel().tolist() == [1, 1, 1, 1]  # probability=1.0 is honoured
        values = np.asarray(uniforms).ravel()
        assert values.min() >= 2.0 and values.max() < 3.0 and len(set(values.tolist())) == 4
    assert _batches(OldNames(jpeg_files[:8], batch_size=4, num_threads=1, seed=3)) == _batches(new)


@pytest.mark.parametrize("op_name", sorted(OLD_NAMES))
def test_old_names_place_their_operator(op_name):
    """Each old name, in ``fn`` and in ``ops``, reaches its operator: the operator's own argument
    check (a missing path, an unknown argument) names it."""
    old_class, old_fn = OLD_NAMES[op_name]
    assert old_fn in dir(fn)
    with defining(Graph()):
        inputs = () if op_name.startswith(("readers.", "random.")) else (fn.random.coin_flip(),)
        for place in (getattr(fn, old_fn), getattr(ops, old_class)()):
            with pytest.raises(rp.ArgumentError, match=rf"^{re.escape(op_name)}: "):
                place(*inputs, no_such_argument=1)


def test_fn_old_names_give_the_same_batches(jpeg_files):
    def graph(old):
        jpegs, labels = (fn.file_reader if old else fn.readers.file)(files=jpeg_files[:6], random_shuffle=True)
        images = (fn.image_decoder_random_crop if old else fn.decoders.image_random_crop)(jpegs)
        coin = (fn.coin_flip if old else fn.random.coin_flip)(probability=0.5)
        return fn.resize(images, resize_x=24, resize_y=24), labels, coin, (fn.uniform if old else fn.random.uniform)()

    runs = [_batches(rp.pipeline_def(graph, batch_size=3, num_threads=1, seed=9)(old)) for old in (True, False)]
    assert runs[0] == runs[1]


def test_interp_types_and_layout_names_follow_dali():
    assert [m.name for m in types.DALIInterpType] == [
        "INTERP_NN",
        "INTERP_LINEAR",
        "INTERP_CUBIC",
        "INTERP_LANCZOS3",
        "INTERP_TRIANGULAR",
        "INTERP_GAUSSIAN",
    ]
    assert [m.value for m in types.DALIInterpType] == [0, 1, 2, 3, 4, 5]
    assert types.INTERP_LINEAR is types.DALIInterpType.INTERP_LINEAR
    assert (types.NCHW, types.NHWC, types.NFCHW, types.NFHWC) == ("CHW", "HWC", "FCHW", "FHWC")
    assert types.to_dali_type(np.uint16) is types.UINT16 and types.UINT64.numpy == np.uint64


@pytest.mark.parametrize(
    "op, args", [("resize", {"resize_x": 20, "resize_y": 16}), ("random_resized_crop", {"size": 16})]
)
def test_linear_interp_types_give_the_default_result(jpeg_files, op, args):
    def graph(**interp):
        jpegs, _ = fn.readers.file(files=jpeg_files[:4])
        return getattr(fn, op)(fn.decoders.image(jpegs), **args, **interp)

    default = _batches(rp.pipeline_def(graph, batch_size=2, num_threads=1, seed=1)(), 2)
    linear = {"interp_type": types.INTERP_LINEAR, "min_filter": types.INTERP_LINEAR, "mag_filter": "INTERP_LINEAR"}
    assert _batches(rp.pipeline_def(graph, batch_size=2, num_threads=1, seed=1)(**linear), 2) == default
    # DALI's resize gives INTERP_TRIANGULAR's results for INTERP_LINEAR (its default antialiasing is triangular)
    triangular = {"interp_type": types.INTERP_TRIANGULAR, "min_filter": "triangular", "mag_filter": "INTERP_LINEAR"}
    assert _batches(rp.pipeline_def(graph, batch_size=2, num_threads=1, seed=1)(**triangular), 2) == default


# resize and random_resized_crop take INTERP_NN, INTERP_LINEAR, INTERP_TRIANGULAR, INTERP_CUBIC and INTERP_LANCZOS3;
# rotate takes INTERP_NN and INTERP_LINEAR only (as DALI's, whose warp refuses the others)
_RESIZING = {types.INTERP_NN, types.INTERP_LINEAR, types.INTERP_TRIANGULAR, types.INTERP_CUBIC, types.INTERP_LANCZOS3}
_ACCEPTED = {
    "resize": _RESIZING,
    "random_resized_crop": _RESIZING,
    "rotate": {types.INTERP_NN, types.INTERP_LINEAR},
}
_REFUSED = [
    (op, args, arg, interp)
    for op, args, arg in [
        ("resize", {"resize_x": 20}, "interp_type"),
        ("resize", {"resize_x": 20}, "min_filter"),
        ("resize", {"resize_x": 20}, "mag_filter"),
        ("random_resized_crop", {"size": 16}, "interp_type"),
        ("random_resized_crop", {"size": 16}, "min_filter"),
        ("rotate", {"angle": 10.0}, "interp_type"),
    ]
    for interp in types.DALIInterpType
    if interp not in _ACCEPTED[op]
]


@pytest.mark.parametrize("op, args, arg, interp", _REFUSED)
def test_interp_types_not_implemented_are_refused_by_name(jpeg_files, op, args, arg, interp):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=1)
    def graph():
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        return getattr(fn, op)(fn.decoders.image(jpegs), **args, **{arg: interp})

    with pytest.raises(rp.ArgumentError, match=rf"{op}: {arg} types\.{interp.name} is not supported"):
        graph().build()


def test_nchw_is_the_per_sample_layout_as_in_dali(jpeg_files):
    @rp.pipeline_def(batch_size=2, num_threads=1, seed=1, device_id=types.CPU_ONLY_DEVICE_ID)
    def graph():
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        images = fn.resize(fn.decoders.image(jpegs), resize_x=8, resize_y=6)
        return fn.crop_mirror_normalize(images, output_layout=types.NCHW), fn.transpose(images, perm=[2, 0, 1])

    with graph() as pipe:
        assert pipe.device_id is None
        normalized, transposed = pipe.run()
        assert normalized.layout() == "CHW" and np.asarray(normalized).shape == (2, 3, 6, 8)
        np.testing.assert_array_equal(np.asarray(normalized), np.asarray(transposed).astype(np.float32))


# --- against DALI's own names (DALI is not installed in CI) ---


#: operators a framework plugin registers, by DALI's modules holding their class and ``fn`` function
PLUGIN_OPERATORS = {
    "torch_python_function": ("nvidia.dali.plugin.pytorch", "nvidia.dali.plugin.pytorch.fn"),
    "numba_function": ("nvidia.dali.plugin.numba", "nvidia.dali.plugin.numba.fn"),
}


def test_every_operator_has_dalis_ops_and_fn_name():
    dali_ops = pytest.importorskip("nvidia.dali.ops")
    dali_fn = pytest.importorskip("nvidia.dali.fn")
    import raypipe.plugin.numba  # noqa: F401  (registers numba_function)
    import raypipe.plugin.pytorch  # noqa: F401  (registers torch_python_function)

    for op_name in registry():
        if op_name.startswith("_"):
            continue
        module, _, leaf = op_name.rpartition(".")
        if op_name in PLUGIN_OPERATORS:  # not in DALI's ops and fn: in its plugin's modules
            classes, functions = (importlib.import_module(m) for m in PLUGIN_OPERATORS[op_name])
            assert getattr(classes, class_name(op_name)).__name__ == getattr(ops, class_name(op_name)).__name__
            assert callable(getattr(functions, leaf))
            continue
        path = [*module.split("."), class_name(op_name)] if module else [class_name(op_name)]
        ours, theirs = ops, dali_ops
        for part in path:
            ours, theirs = getattr(ours, part), getattr(theirs, part)
        assert theirs.__name__ == ours.__name__
        namespace = dali_fn
        for part in module.split(".") if module else ():
            namespace = getattr(namespace, part)
        assert callable(getattr(namespace, leaf))


#: DALI's deprecated operators that are not another's name but operators of their own (other inputs
#: and outputs, or other defaults, than the operator DALI recommends instead): ops class -> the
#: operator it places
OPERATORS_OF_THEIR_OWN = {"SSDRandomCrop": "ssd_random_crop", "FastResizeCropMirror": "fast_resize_crop_mirror"}


def test_every_old_name_dali_ships_for_our_operators_is_here():
    dali_ops = pytest.importorskip("nvidia.dali.ops")
    from nvidia.dali import backend

    def ours(path):
        node = ops
        for part in path.split("__"):
            node = getattr(node, part, None)
        return node

    shipped = set()
    for name in dir(dali_ops):
        try:
            schema = backend.GetSchema(name)
        except (KeyError, RuntimeError):  # Python-only classes (Compose, ExternalSource, ...)
            continue
        if name in OPERATORS_OF_THEIR_OWN:
            assert getattr(ops, name).op_name == OPERATORS_OF_THEIR_OWN[name]
            continue
        if schema.IsDeprecated() and schema.DeprecatedInFavorOf() and ours(schema.DeprecatedInFavorOf()) is not None:
            shipped.add(name)
            assert getattr(ops, name) is ours(schema.DeprecatedInFavorOf())
    assert shipped == {old for old, _ in OLD_NAMES.values()}


def test_experimental_names_are_the_operators_function_and_class(jpeg_files):
    """``fn.experimental.X`` / ``ops.experimental.X``, DALI's deprecated names, place operator X."""
    for alias, op_name in EXPERIMENTAL.items():
        module, _, leaf = alias.rpartition(".")
        fn_namespace, ops_namespace = fn, ops
        for part in module.split("."):
            fn_namespace, ops_namespace = getattr(fn_namespace, part), getattr(ops_namespace, part)
        assert getattr(fn_namespace, leaf).__qualname__ == f"fn.{op_name}"
        assert getattr(ops_namespace, class_name(alias)) is factory(op_name)

    @rp.pipeline_def(batch_size=2, num_threads=1, seed=0)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:2])
        return fn.experimental.equalize(fn.experimental.decoders.image(jpegs)), fn.equalize(fn.decoders.image(jpegs))

    with pipe() as p:
        old, new = p.run()
    assert all(np.array_equal(np.asarray(old.at(i)), np.asarray(new.at(i))) for i in range(2))


def test_every_experimental_name_dali_ships_for_our_operators_is_here():
    pytest.importorskip("nvidia.dali.ops")
    from nvidia.dali import backend

    def schema_name(op_name: str) -> str:
        module = op_name.rpartition(".")[0]
        return "__".join([*module.split("."), class_name(op_name)] if module else [class_name(op_name)])

    ours = {schema_name(op_name): op_name for op_name in registry() if not op_name.startswith("_")}
    shipped = {}
    for name in {*backend.RegisteredCPUOps(), *backend.RegisteredGPUOps()}:
        schema = backend.GetSchema(name)
        if name.startswith("experimental__") and schema.IsDeprecated() and schema.DeprecatedInFavorOf() in ours:
            shipped[name] = ours[schema.DeprecatedInFavorOf()]
    assert {schema_name(alias): op for alias, op in DEPRECATED_EXPERIMENTAL.items()} == shipped


def test_triangular_resize_matches_dalis_linear_resize():
    dali = pytest.importorskip("nvidia.dali")
    image = (np.arange(90 * 120 * 3).reshape(90, 120, 3) * 7 % 251).astype(np.uint8)

    def dali_resize(interp):
        @dali.pipeline_def(batch_size=1, num_threads=1, device_id=None)
        def graph():
            source = dali.fn.external_source(source=lambda: [image], batch=True, layout="HWC")
            return dali.fn.resize(source, resize_x=50, resize_y=40, interp_type=interp)

        pipe = graph()
        pipe.build()
        return np.asarray(pipe.run()[0][0])

    np.testing.assert_array_equal(dali_resize(dali.types.INTERP_TRIANGULAR), dali_resize(dali.types.INTERP_LINEAR))


def test_types_match_dalis():
    dali_types = pytest.importorskip("nvidia.dali.types")
    for member in types.DALIInterpType:
        assert int(getattr(dali_types, member.name)) == member.value
        assert getattr(dali_types.DALIInterpType, member.name).name == member.name
    for member in types.DALIDataType:
        assert hasattr(dali_types.DALIDataType, member.name) and hasattr(dali_types, member.name)
    assert [m.name for m in types.DALIImageType] == list(dali_types.DALIImageType.__members__)
    assert types.ANY_DATA is types.DALIImageType.ANY_DATA
    for name in ("NCHW", "NHWC", "NFCHW", "NFHWC", "CPU_ONLY_DEVICE_ID"):
        assert getattr(types, name) == getattr(dali_types, name)
    assert types.to_dali_type(np.float32).name == dali_types.to_dali_type(np.float32).name


def test_the_modules_dali_scripts_reach_through_the_package_are_its_attributes():
    """``import nvidia.dali as dali`` then ``dali.fn``, ``dali.math.clamp``, ``dali.pipeline.Pipeline``."""
    import types as python_types

    for name in ("fn", "ops", "types", "math", "pipeline", "tfrecord"):
        assert isinstance(getattr(rp, name), python_types.ModuleType), name


def test_the_modules_scripts_import_classes_from_are_here_as_in_dali(jpeg_files):
    """``from nvidia.dali.tensors import TensorListCPU`` and ``from nvidia.dali.data_node import
    DataNode`` in DALI scripts work renamed, for ``isinstance`` on what pipelines give."""
    from raypipe.data_node import DataNode
    from raypipe.tensors import TensorCPU, TensorGPU, TensorListCPU, TensorListGPU

    nodes = []

    @rp.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def pipe():
        jpegs, labels = fn.readers.file(files=jpeg_files[:2])
        nodes.extend([jpegs, fn.decoders.image(jpegs)])
        return labels

    with pipe() as p:
        (labels,) = p.run()
    assert nodes and all(isinstance(n, DataNode) for n in nodes)
    assert isinstance(labels, TensorListCPU) and not isinstance(labels, TensorListGPU)
    assert isinstance(labels[0], TensorCPU) and not isinstance(labels[0], TensorGPU)
    dali = pytest.importorskip("nvidia.dali")
    for module in ("tensors", "data_node"):
        ours = importlib.import_module(f"raypipe.{module}").__all__
        assert set(ours) <= set(dir(importlib.import_module(f"{dali.__name__}.{module}"))), module


def test_namespaces_import_as_dalis_submodules_do():
    """``from nvidia.dali.ops.transforms import Rotation`` and ``import nvidia.dali.fn.readers`` in
    DALI scripts work renamed."""
    import importlib

    import raypipe.fn.readers
    from raypipe.fn.experimental.readers import video
    from raypipe.fn.transforms import rotation
    from raypipe.ops.readers import COCO
    from raypipe.ops.transforms import Rotation

    assert raypipe.fn.readers.file.__qualname__ == "fn.readers.file"
    assert video.__qualname__ == "fn.experimental.readers.video"
    assert rotation.__qualname__ == "fn.transforms.rotation"
    assert Rotation is ops.transforms.Rotation and COCO is ops.readers.COCO
    assert "file" in dir(importlib.import_module("raypipe.fn.readers"))
    module = importlib.import_module("raypipe.fn.readers")
    assert pickle.loads(pickle.dumps(module)) is module  # ray's cloudpickle ships the submodules code reaches
    with pytest.raises(AttributeError, match="no operator fn.readers.nothing"):
        importlib.import_module("raypipe.fn.readers").nothing  # noqa: B018
