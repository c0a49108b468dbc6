"""DALI class-style operators: ``ops.Resize(device="gpu", resize_x=224)`` created once in
``__init__`` and called on inputs in ``define_graph``.

There is one class per operator (``ops.X is ops.X``), named by DALI's current name; DALI's
deprecated top-level names that it still ships (``ops.FileReader``, ``ops.ImageDecoder``,
``ops.CoinFlip``, ...) are that class too (``ops.ImageDecoder is ops.decoders.Image``; DALI makes
each alias a class of its own, which builds the same operator), and so are the decoder names DALI
had before 1.0 (``ops.nvJPEGDecoderRandomCrop is ops.decoders.ImageRandomCrop``), and DALI's
deprecated ``experimental`` names (``ops.experimental.Filter is ops.Filter``).
"""

from __future__ import annotations

from typing import Any

from .graph import DataNode, current_graph, defining_a_graph
from .input_sets import place
from .operator import EXPERIMENTAL, OLD_NAMES, registry


class OperatorFactory:
    """A configured operator; each call places one instance of it in the graph."""

    op_name: str = ""

    def __init__(self, *args: Any, device: str | None = None, **kwargs: Any):
        names = registry()[self.op_name].positional_args  # ops.ExternalSource(source, num_outputs)
        if len(args) > len(names):
            raise TypeError(f"ops.{type(self).__qualname__} takes {len(names)} positional arguments, got {len(args)}")
        self.device = device
        self.kwargs = {**dict(zip(names, args)), **kwargs}

    def __call__(self, *inputs: DataNode, **call_kwargs: Any):
        # None given to the call leaves the construction's value, as in DALI
        kwargs = {**self.kwargs, **{k: v for k, v in call_kwargs.items() if v is not None}}
        if not defining_a_graph():  # in a pipeline's __init__, as DALI allows: placed where it is used
            from .deferred_node import DeferredNode

            return DeferredNode(self.op_name, inputs, kwargs, self.device, f"ops.{type(self).__qualname__}()")
        return place(current_graph(f"ops.{type(self).__qualname__}"), self.op_name, inputs, kwargs, self.device)


# DALI's class names where they are not the capitalised operator name
_CLASS_NAMES = {
    "readers.tfrecord": "TFRecord",
    "readers.mxnet": "MXNet",
    "readers.coco": "COCO",
    "readers.nemo_asr": "NemoAsr",
    "mfcc": "MFCC",
    "roi_random_crop": "ROIRandomCrop",
    "segmentation.random_object_bbox": "RandomObjectBBox",
    "random_bbox_crop": "RandomBBoxCrop",
    "bbox_paste": "BBoxPaste",
    "bbox_rotate": "BBoxRotate",
    "ssd_random_crop": "SSDRandomCrop",
    "reductions.rms": "RMS",
    "dl_tensor_python_function": "DLTensorPythonFunction",
}
#: the decoders' class names before DALI 1.0 (DALI no longer has them) -> the operator each places:
#: public training scripts of that time still use them; ``nvJPEG*`` was DALI's mixed decoder and
#: ``Host*`` its CPU one, and the scripts say so in their ``device`` argument
REMOVED_NAMES = {
    f"{family}{kind}": op_name
    for family in ("nvJPEGDecoder", "HostDecoder")
    for kind, op_name in (
        ("", "decoders.image"),
        ("Crop", "decoders.image_crop"),
        ("RandomCrop", "decoders.image_random_crop"),
        ("Slice", "decoders.image_slice"),
    )
}
#: the deprecated top-level class names -> the operator each places
ALIASES = {alias: op_name for op_name, (alias, _) in OLD_NAMES.items()} | REMOVED_NAMES
_CLASSES: dict[str, type[OperatorFactory]] = {}  # by operator name


def class_name(op_name: str) -> str:
    """DALI's ``ops`` class name of operator ``op_name`` (``"decoders.image"`` -> ``"Image"``)."""
    if op_name in _CLASS_NAMES:
        return _CLASS_NAMES[op_name]
    return "".join(part.capitalize() for part in op_name.rsplit(".", 1)[-1].split("_"))


def factory(op_name: str) -> type[OperatorFactory]:
    """The one ``ops`` class of operator ``op_name`` (``ops.decoders.Image``, also ``ops.ImageDecoder``)."""
    cls = _CLASSES.get(op_name)
    if cls is None:
        prefix = op_name.rpartition(".")[0]
        name = class_name(op_name)
        namespace = {
            "op_name": op_name,
            "__doc__": registry()[op_name].__doc__,
            "__module__": __name__,
            "__qualname__": f"{prefix}.{name}" if prefix else name,
        }
        cls = _CLASSES[op_name] = type(name, (OperatorFactory,), namespace)
    return cls


class _Namespace:
    def __init__(self, prefix: str):
        self._prefix = prefix

    def _members(self) -> tuple[dict[str, str], set[str]]:
        """The classes (name -> operator) and sub-namespaces directly under this prefix."""
        classes: dict[str, str] = {}
        subs: set[str] = set()
        for op_name in (*registry(), *(k for k, v in EXPERIMENTAL.items() if v in registry())):
            if not op_name.startswith(self._prefix):
                continue
            head, dot, _ = op_name[len(self._prefix) :].partition(".")
            if head.startswith("_"):
                continue
            if dot:
                subs.add(head)
            else:
                classes[class_name(op_name)] = EXPERIMENTAL.get(op_name, op_name)
        return classes, subs

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if not self._prefix and attr in ALIASES and ALIASES[attr] in registry():
            return factory(ALIASES[attr])
        classes, subs = self._members()
        if attr in classes:
            return factory(classes[attr])
        if attr in subs:
            return _Namespace(f"{self._prefix}{attr}.")
        raise AttributeError(f"raypipe has no operator ops.{self._prefix}{attr}")

    def __dir__(self):
        classes, subs = self._members()
        names = set(classes) | subs
        if not self._prefix:
            names |= {a for a, op_name in ALIASES.items() if op_name in registry()}
        return sorted(names)


_root = _Namespace("")


def __getattr__(attr: str):
    return getattr(_root, attr)


def __dir__():
    return sorted(set(globals()) | set(dir(_root)))


def register_namespace_modules() -> None:
    """Make ``from raypipe.ops.<namespace> import ...`` work, as with DALI's packages."""
    from .namespace_modules import register

    register(__name__, (*registry(), *EXPERIMENTAL), _Namespace)
