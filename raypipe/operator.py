"""The operator contract and the registry that ``fn`` and ``ops`` are built from.

An operator runs per sample on the host (CPU stage, and the host part of
"mixed" decoders) through :meth:`Operator.run_sample`, and per batch in the GPU
stage through :meth:`Operator.run_batch`. Most operators implement only
:meth:`Operator.compute`, written against an array module ``xp`` (numpy or
cupy), which serves both stages; an operator may override ``run_sample`` with a
faster host implementation (Pillow) as long as it matches ``compute`` within its
stated tolerance.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from . import device_check
from .errors import ArgumentError, did_you_mean
from .keyed_random import SampleContext, keyed_uniforms, reused_generator
from .sample_contexts import SampleContexts

DEVICES = ("cpu", "mixed", "gpu")
STAGE_ORDER = {"cpu": 0, "mixed": 1, "gpu": 2}


class Skip:
    """Returned by ``run_sample`` to drop a sample (decoders with ``on_error="skip"``)."""

    def __init__(self, reason: str):
        self.reason = reason


@dataclass(frozen=True)
class Schema:
    """What an operator is called, where it may run and how it is wired."""

    name: str
    devices: tuple[str, ...] = ("cpu", "gpu")
    min_inputs: int = 1
    max_inputs: int = 1
    num_outputs: int = 1
    arg_inputs: tuple[str, ...] = ()
    is_reader: bool = False


_REGISTRY: dict[str, type[Operator]] = {}

#: DALI's deprecated top-level names that it still ships, for the operators raypipe has:
#: operator -> (``ops`` class name, ``fn`` function name).
OLD_NAMES: dict[str, tuple[str, str]] = {
    "readers.file": ("FileReader", "file_reader"),
    "readers.caffe": ("CaffeReader", "caffe_reader"),
    "readers.caffe2": ("Caffe2Reader", "caffe2_reader"),
    "readers.tfrecord": ("TFRecordReader", "tfrecord_reader"),
    "readers.mxnet": ("MXNetReader", "mxnet_reader"),
    "readers.numpy": ("NumpyReader", "numpy_reader"),
    "readers.coco": ("COCOReader", "coco_reader"),
    "readers.sequence": ("SequenceReader", "sequence_reader"),
    "readers.video": ("VideoReader", "video_reader"),
    "readers.video_resize": ("VideoReaderResize", "video_reader_resize"),
    "decoders.image": ("ImageDecoder", "image_decoder"),
    "decoders.image_random_crop": ("ImageDecoderRandomCrop", "image_decoder_random_crop"),
    "decoders.image_crop": ("ImageDecoderCrop", "image_decoder_crop"),
    "decoders.image_slice": ("ImageDecoderSlice", "image_decoder_slice"),
    "random.coin_flip": ("CoinFlip", "coin_flip"),
    "random.uniform": ("Uniform", "uniform"),
    "random.normal": ("NormalDistribution", "normal_distribution"),
    "decoders.audio": ("AudioDecoder", "audio_decoder"),
    "readers.nemo_asr": ("NemoAsrReader", "nemo_asr_reader"),
    "transforms.translation": ("TransformTranslation", "transform_translation"),
}


#: DALI's deprecated ``experimental`` names that DALI 2.4 still ships, for the operators raypipe has:
#: ``fn.experimental.<name>`` and ``ops.experimental.<Class>`` are the operator's own function and class.
DEPRECATED_EXPERIMENTAL: dict[str, str] = {
    f"experimental.{name}": name
    for name in (
        "decoders.image",
        "decoders.image_crop",
        "decoders.image_random_crop",
        "decoders.image_slice",
        "decoders.video",
        "equalize",
        "filter",
        "debayer",
        "peek_image_shape",
        "tensor_resize",
        "audio_resample",
    )
}
DEPRECATED_EXPERIMENTAL["experimental.inflate"] = "decoders.inflate"

#: DALI's ``experimental`` variants of an operator (another GPU implementation taking the same
#: arguments) that raypipe computes as the operator itself.
EXPERIMENTAL_VARIANTS: dict[str, str] = {"experimental.resize": "resize"}

#: Every ``experimental`` name that is another operator's function and class.
EXPERIMENTAL: dict[str, str] = {**DEPRECATED_EXPERIMENTAL, **EXPERIMENTAL_VARIANTS}


def register(cls: type[Operator]) -> type[Operator]:
    """Class decorator: make an operator reachable as ``fn.<name>`` and ``ops.<Name>``."""
    _REGISTRY[cls.schema.name] = cls
    return cls


def registry() -> dict[str, type[Operator]]:
    """Every registered operator by dotted name (``"decoders.image"``)."""
    from . import operators  # noqa: F401  (registers the built-in operators)

    return _REGISTRY


def _check_names(op: str, configure: Callable[..., None], kwargs: dict[str, Any]) -> None:
    """Raise naming an argument ``configure`` does not take, with the names closest to it (a
    ``configure`` taking ``**kwargs`` checks its own)."""
    accepted = _accepted_names(configure.__func__)
    if accepted is None:
        return
    for name in kwargs:
        if name not in accepted:
            raise ArgumentError(f"{op}: unexpected keyword argument {name!r}{did_you_mean(name, accepted)}")


@functools.cache
def _accepted_names(configure: Callable[..., None]) -> frozenset[str] | None:
    """The keyword arguments ``configure`` takes; None when it takes any (``**kwargs``)."""
    parameters = list(inspect.signature(configure).parameters.values())[1:]  # past self
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(p.name for p in parameters if p.kind is not inspect.Parameter.VAR_POSITIONAL)


class Operator:
    """Base class of every operator. Subclasses set ``schema`` and ``configure``.

    Every operator also takes DALI's common arguments, handled here: ``seed`` (the operator's own
    random seed: its draws depend on it, the epoch and the sample, no longer on the pipeline's seed
    or the operator's place in the graph; -1 or None: the pipeline's seed), ``preserve`` (keep the
    operator when no output needs it: it runs for every sample) and ``bytes_per_sample_hint`` (a
    memory hint, validated and not needed here)."""

    schema: ClassVar[Schema]

    def __init__(
        self,
        device: str,
        op_id: int,
        *,
        seed: int | None = None,
        preserve: bool = False,
        bytes_per_sample_hint: int | Sequence[int] = 0,
        **kwargs: Any,
    ):
        self.device = device
        self.op_id = op_id
        self.seed = _op_seed(self.schema.name, seed)
        if not isinstance(preserve, (bool, np.bool_)):
            raise ArgumentError(f"{self.schema.name}: preserve must be a bool, got {preserve!r}")
        self.preserve = bool(preserve)
        _check_hint(self.schema.name, bytes_per_sample_hint)
        _check_names(self.schema.name, self.configure, kwargs)
        try:
            self.configure(**kwargs)
        except TypeError as exc:
            message = re.sub(r"^\w+\.configure\(\) ", "", str(exc))  # the operator's words, not the method's
            raise ArgumentError(f"{self.schema.name}: {message}") from None

    def configure(self) -> None:
        """Validate and store the operator's static arguments (raise ArgumentError)."""

    def preload(self) -> None:
        """Import what the operator's host path loads on its first call (torch for resizing and
        FFTs: a second or more), so that a process building its pipeline before it is asked for a
        batch can pay it then (:meth:`raypipe.engine.Engine.preload`)."""

    @property
    def num_outputs(self) -> int:
        """Outputs of this instance (the schema's, unless they depend on the arguments)."""
        return len(self.output_names) if self.output_names is not None else self.schema.num_outputs

    def bind_inputs(self, count: int, arg_inputs: Collection[str]) -> None:
        """Told, when placed in a graph (before its outputs are made), how many regular inputs this
        instance has and which arguments come per sample: operators whose outputs depend on the count
        keep it (``random_bbox_crop``'s labels), and operators whose required arguments may come per
        sample check them here (``crop``, ``resize``)."""

    def bind_upstream(self, inputs: Sequence[Any]) -> None:
        """Told, when placed in a graph, the data nodes of its regular inputs: an operator that
        reports where its input came from keeps what it needs (``get_property``'s source)."""

    #: Arguments that may hold one value per frame of a sequence (``fn.per_frame``), as DALI's schema
    #: allows them: the operator then runs frame by frame (:mod:`raypipe.frame_args`).
    per_frame_args: ClassVar[frozenset[str]] = frozenset()

    #: Positions of the inputs that may hold one value per frame in the same way (a layout starting
    #: with ``F``); an operator's input 0 is the sequence itself unless ``frames_from_arguments``.
    per_frame_inputs: ClassVar[frozenset[int]] = frozenset()

    #: Whether per-frame arguments and inputs alone give the frames, without an input sequence (the
    #: ``transforms`` operators: their output is then a sequence of transforms).
    frames_from_arguments: ClassVar[bool] = False

    #: Arguments that a call may also pass positionally, in order (``fn.external_source(source)``).
    positional_args: ClassVar[tuple[str, ...]] = ()

    #: Names of the outputs when ``fn``/``ops`` return them as a dict (TFRecord features); else None.
    output_names: tuple[str, ...] | None = None

    def then(self) -> tuple[str, dict[str, Any]] | None:
        """An operator (its name and arguments) that the graph places on this one's first output, whose
        output callers get instead: a decoder's conversion to its ``dtype``. None: nothing."""
        return None

    def output_layout(self, input_layouts: Sequence[str]) -> str:
        """Layout of the first output given the inputs' layouts."""
        return input_layouts[0] if input_layouts else ""

    def host_batch_step(self, arg_inputs: Collection[str]) -> bool:
        """Whether this operator on ``device="cpu"`` needs the whole batch (given the names of its
        argument inputs), as DALI's CPU operators with batch-wide semantics do: it then runs once
        per batch through :meth:`run_batch` with ``xp=numpy``, after the CPU stage, instead of per
        sample in it."""
        return False

    def compute(self, xp: ModuleType, inputs: Sequence[Any], args: dict[str, Any], ctx: SampleContext) -> Any:
        """One sample, written against the array module ``xp``."""
        raise NotImplementedError(f"{self.schema.name} has no array-module implementation")

    def run_sample(self, inputs: Sequence[Any], args: dict[str, Any], ctx: SampleContext) -> Any:
        """One sample on the host (CPU stage)."""
        return self.compute(np, inputs, args, ctx)

    def run_batch(
        self,
        xp: ModuleType,
        inputs: Sequence[list[Any]],
        args: dict[str, list[Any]],
        ctxs: Sequence[SampleContext],
    ) -> list[Any] | tuple[list[Any], ...]:
        """One batch in the GPU stage. Each input is a sequence of per-sample device arrays (a
        list, or one array holding the whole batch); return the same for each output.

        This default computes sample by sample (on a GPU, a few launches per sample): it warns once
        per operator and process where it runs on a GPU, so a slow path is never silent."""
        if xp is not np:
            device_check.warn_once(
                f"per-sample:{self.schema.name}",
                f"{self.schema.name} runs sample by sample on the GPU (no batched kernel takes this batch): "
                "a few launches per sample; pipe.device_report() says which operators run how",
            )
        outs = [
            self.compute(xp, [inp[i] for inp in inputs], {k: v[i] for k, v in args.items()}, ctx)
            for i, ctx in enumerate(ctxs)
        ]
        if self.num_outputs == 1:
            return outs
        return tuple([o[k] for o in outs] for k in range(self.num_outputs))

    def rng(self, ctx: SampleContext) -> np.random.Generator:
        """This operator's random stream for the sample in ``ctx``: keyed by the pipeline's seed and
        this operator's place in the graph, or by the operator's own ``seed`` when it has one."""
        if self.seed is None:
            return ctx.rng(self.op_id)
        return reused_generator(self.seed, ctx.epoch, ctx.sample_index, SEEDED_STREAM)

    def draws(self, ctxs: Sequence[SampleContext], count: int) -> np.ndarray:
        """``count`` uniform floats in [0, 1) per sample of ``ctxs``, keyed as :meth:`rng` is:
        shape ``(count, len(ctxs))``, a column per sample, which does not depend on the samples
        drawn with it (a chunk drawn at once gives what each sample drawn alone gives)."""
        if isinstance(ctxs, SampleContexts):  # a batch's identities as one array: no object per sample
            seed, epoch, indices = ctxs.seed, ctxs.epoch, ctxs.sample_indices
        else:
            keys = {(ctx.seed, ctx.epoch) for ctx in ctxs}
            if len(keys) > 1:  # samples of several epochs or pipelines: each alone, columns in order
                return np.concatenate([self.draws([ctx], count) for ctx in ctxs], axis=1)
            seed, epoch = keys.pop() if keys else (0, 0)
            indices = [ctx.sample_index for ctx in ctxs]
        stream = self.op_id
        if self.seed is not None:
            seed, stream = self.seed, SEEDED_STREAM
        return keyed_uniforms(seed, stream, epoch, indices, count)


#: The stream id of operators with their own ``seed`` (beyond any place in a graph): as in DALI, two
#: operators with the same seed draw the same values.
SEEDED_STREAM = 0x0F_5EED_0F_0B


def _op_seed(op: str, seed: Any) -> int | None:
    if seed is None or (isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed == -1):
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ArgumentError(f"{op}: seed must be a non-negative int (or -1: the pipeline's seed), got {seed!r}")
    return int(seed)


def _check_hint(op: str, hint: Any) -> None:
    values = hint if isinstance(hint, (list, tuple)) else [hint]
    if any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0 for v in values):
        raise ArgumentError(f"{op}: bytes_per_sample_hint must be a non-negative int or a list of them, got {hint!r}")


def check_range(op: str, name: str, value: Sequence[float], low: float | None = None) -> tuple:
    """Validate a ``[lo, hi]`` argument; return it as a tuple of floats."""
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ArgumentError(f"{op}: {name} must be a pair [lo, hi], got {value!r}") from None
    if lo > hi or (low is not None and lo < low):
        bound = f" with lo >= {low}" if low is not None else ""
        raise ArgumentError(f"{op}: {name} must satisfy lo <= hi{bound}, got {value!r}")
    return lo, hi


def check_number(op: str, name: str, value: Any) -> float:
    """A finite float argument; ArgumentError naming the operator and argument otherwise."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ArgumentError(f"{op}: {name} must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ArgumentError(f"{op}: {name} must be finite, got {value!r}")
    return number


def as_scalar(value: Any) -> Any:
    """A per-sample argument value (0-d or 1-element array, or a Python scalar) as a scalar."""
    if isinstance(value, np.ndarray):
        return value.reshape(-1)[0].item()
    return value
