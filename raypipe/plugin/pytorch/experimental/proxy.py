"""DALI's proxy (``nvidia.dali.plugin.pytorch.experimental.proxy``): a PyTorch ``DataLoader``'s
workers prepare each sample's pipeline inputs (a file's path from a torchvision dataset, say), and
the main process runs the pipeline once per collated batch.

``server.proxy`` stands in for a transform. Called in a worker with a sample's inputs (by the names
of the pipeline's fed external sources; positionally when there is one), it adds them to that
worker's current batch and returns one :class:`DALIOutputSampleRef` per pipeline output. torch's
``default_collate`` turns a batch of them into a :class:`DALIOutputBatchRef` and, unless
``deterministic``, sends the batch's inputs to the server at once, so the pipeline runs while the
batch travels to the main process. ``server.produce_data(batch)``, which :class:`DataLoader` calls
on every batch, puts each output tensor where the batch holds its reference, waiting for its run.
With ``deterministic=True`` the inputs travel inside the batch and the pipeline runs them when
``produce_data`` asks, in the order batches are consumed, whatever the workers' timing.

The server runs the pipeline in one thread of the main process, started by ``with server:``,
:meth:`DALIServer.start_thread` or the first iteration of a :class:`DataLoader`, and stopped on
leaving the ``with`` block, by :meth:`DALIServer.stop_thread`, or when the server is dropped.
"""

from __future__ import annotations

import itertools
import queue
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
import torch.multiprocessing as mp
from torch.utils import data as torch_data
from torch.utils.data._utils.collate import default_collate_fn_map

from ....errors import ArgumentError
from ....pipeline import Pipeline
from .. import to_torch

__all__ = ["DALIServer", "DataLoader"]

_POLL = 0.1  # seconds between checks of the stop event and of the runner's life


class DALIPipelineRunRef:
    """One run of the pipeline: its id (worker, batch of that worker) and its inputs by source name
    until they are sent to the server."""

    def __init__(self, batch_id: tuple[int, int]):
        self.batch_id = batch_id
        self.call_args: dict[str, list[Any]] = {}
        self.is_scheduled = False
        self.is_complete = False

    def __repr__(self) -> str:
        return (
            f"DALIPipelineRunRef(batch_id={self.batch_id}, inputs={sorted(self.call_args)}, "
            f"is_scheduled={self.is_scheduled}, is_complete={self.is_complete})"
        )


class DALIOutputSampleRef:
    """Output ``output_idx`` of sample ``sample_idx`` of a run: what ``proxy(...)`` returns."""

    def __init__(self, proxy: _Proxy, pipe_run_ref: DALIPipelineRunRef, output_idx: int, sample_idx: int):
        self.proxy = proxy
        self.pipe_run_ref = pipe_run_ref
        self.output_idx = output_idx
        self.sample_idx = sample_idx

    def __repr__(self) -> str:
        run = self.pipe_run_ref.batch_id
        return f"DALIOutputSampleRef({run}, output_idx={self.output_idx}, sample_idx={self.sample_idx})"


class DALIOutputBatchRef:
    """Output ``output_idx`` of a run: what a collated batch holds until ``produce_data``."""

    def __init__(self, pipe_run_ref: DALIPipelineRunRef, output_idx: int):
        self.pipe_run_ref = pipe_run_ref
        self.output_idx = output_idx

    def __repr__(self) -> str:
        return f"DALIOutputBatchRef({self.pipe_run_ref.batch_id}, output_idx={self.output_idx})"


def _collate_sample_refs(samples: list[DALIOutputSampleRef], *, collate_fn_map: Any = None) -> DALIOutputBatchRef:
    """torch's collate of one output's sample references: one run's samples 0 to n-1 in order.
    Completes the run and, unless the proxy is deterministic, sends its inputs to the server."""
    first = samples[0]
    run, output = first.pipe_run_ref, first.output_idx
    for i, sample in enumerate(samples):
        if sample.pipe_run_ref is not run or sample.output_idx != output or sample.sample_idx != i:
            raise RuntimeError(
                "DALIServer: a collated batch must hold the samples of one proxy batch in the order the proxy "
                f"made them (got {sample!r} at position {i} of {first.pipe_run_ref.batch_id}): the proxy's "
                "samples were reordered, mixed or left out (a custom sampler of samples, or collate_fn)"
            )
    run.is_complete = True
    if not first.proxy.deterministic and not run.is_scheduled:
        first.proxy.send(run)
    return DALIOutputBatchRef(run, output)


default_collate_fn_map[DALIOutputSampleRef] = _collate_sample_refs


class _WorkerState(threading.local):
    """The batch a worker (process, or thread of the main process) is filling."""

    run: DALIPipelineRunRef | None = None
    sample = 0
    batches: Iterator[int] | None = None


class _Proxy:
    """``server.proxy``: picklable into a DataLoader's workers, where it collects the inputs."""

    def __init__(self, names: list[str], num_outputs: int, inputs: Any, deterministic: bool):
        self.names = tuple(names)
        self.num_outputs = num_outputs
        self.deterministic = deterministic
        self._inputs = inputs
        self._state = _WorkerState()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_state"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._state = _WorkerState()

    def __call__(self, *args: Any, **kwargs: Any) -> DALIOutputSampleRef | tuple[DALIOutputSampleRef, ...]:
        """Add one sample's inputs to this worker's batch; its outputs' references."""
        inputs = self._bind(args, kwargs)
        state = self._state
        run = state.run
        if run is None or run.is_complete:
            if state.batches is None:
                state.batches = itertools.count()
            info = torch_data.get_worker_info()
            worker = info.id if info is not None else threading.get_ident()
            run = state.run = DALIPipelineRunRef((worker, next(state.batches)))
            state.sample = 0
        for name, value in inputs.items():
            run.call_args.setdefault(name, []).append(value)
        refs = tuple(DALIOutputSampleRef(self, run, i, state.sample) for i in range(self.num_outputs))
        state.sample += 1
        return refs[0] if len(refs) == 1 else refs

    def _bind(self, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The inputs by source name; TypeError naming what is missing or unknown."""
        names = self.names
        if args:
            if len(names) != 1 or len(args) != 1 or kwargs:
                raise TypeError(
                    f"DALIServer.proxy takes the pipeline's inputs by name ({', '.join(names)}); "
                    "only a pipeline with one input takes it positionally"
                )
            return {names[0]: args[0]}
        missing = [n for n in names if n not in kwargs]
        unknown = sorted(set(kwargs) - set(names))
        if missing or unknown:
            raise TypeError(
                f"DALIServer.proxy takes the inputs {', '.join(names)}: "
                + "; ".join(filter(None, (missing and f"missing {missing}", unknown and f"unknown {unknown}")))
            )
        return {n: kwargs[n] for n in names}

    def send(self, run: DALIPipelineRunRef) -> None:
        """Send a complete run's inputs to the server; the run keeps only its id."""
        if not run.call_args:
            raise RuntimeError(f"DALIServer: batch {run.batch_id} has no inputs (was it sent already?)")
        item = DALIPipelineRunRef(run.batch_id)
        item.call_args, item.is_complete, item.is_scheduled = run.call_args, True, True
        self._inputs.put(item)
        run.call_args = {}
        run.is_scheduled = True


def _as_array(value: Any) -> Any:
    """A sample for ``feed_input``: torch tensors become arrays (host memory)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return value if isinstance(value, np.ndarray) else np.asarray(value)


class _Runner:
    """The thread that runs the pipeline on each batch of inputs received, and the outputs (or
    the error) of each batch until it is taken. It does not refer to its server, so a dropped
    server stops it."""

    def __init__(self, pipe: Pipeline, inputs: Any):
        self._pipe = pipe
        self._inputs = inputs
        self._results: dict[tuple[int, int], tuple[torch.Tensor, ...] | BaseException] = {}
        self._ready = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="raypipe-dali-proxy", daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._stop.is_set()

    def stop(self) -> None:
        """Stop the thread (after the batch it is running) and drop the outputs not taken."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        with self._ready:
            self._results.clear()
            self._ready.notify_all()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                item = self._inputs.get(timeout=_POLL)
            except queue.Empty:
                continue
            try:
                batches = {name: [_as_array(v) for v in samples] for name, samples in item.call_args.items()}
                for name, samples in batches.items():
                    self._pipe.feed_input(name, samples)
                result: tuple[torch.Tensor, ...] | BaseException = tuple(
                    to_torch(out, f"output {i}") for i, out in enumerate(self._pipe.run())
                )
            except Exception as exc:
                result = exc
            with self._ready:
                self._results[item.batch_id] = result
                self._ready.notify_all()

    def take(self, batch_id: tuple[int, int]) -> tuple[torch.Tensor, ...]:
        """The outputs of ``batch_id``, once run; the pipeline's error for it, raised."""
        with self._ready:
            while batch_id not in self._results:
                if not self.running:
                    raise RuntimeError(f"DALIServer: stopped before batch {batch_id} ran")
                self._ready.wait(_POLL)
            result = self._results.pop(batch_id)
        if isinstance(result, BaseException):
            raise RuntimeError(f"DALIServer: the pipeline failed on batch {batch_id}: {result}") from result
        return result


class DALIServer:
    """Runs ``pipeline`` on the batches of inputs that ``proxy`` collects in a DataLoader's workers.

    ``pipeline`` needs at least one external source without a ``source`` (what ``proxy`` feeds);
    ``deterministic``: run batches in the order they are consumed rather than as they arrive
    (reproducible when the pipeline draws random numbers, a little slower)."""

    def __init__(self, pipeline: Pipeline, deterministic: bool = False):
        if not isinstance(pipeline, Pipeline):
            raise TypeError(f"DALIServer: expected a raypipe Pipeline, got {type(pipeline).__name__}")
        names = pipeline.fed_source_names()
        if not names:
            raise ArgumentError(
                "DALIServer: the pipeline has no external source to feed (an external_source without source=): "
                "the proxy's inputs go there"
            )
        self._pipe = pipeline
        self._deterministic = bool(deterministic)
        # made in the spawn context, so that workers started either way (fork, spawn, forkserver) can
        # take it: a fork context's queue cannot be pickled into a spawned worker
        self._inputs = mp.get_context("spawn").Queue()
        self._proxy = _Proxy(names, pipeline.num_outputs, self._inputs, self._deterministic)
        self._runner: _Runner | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def proxy(self) -> _Proxy:
        """The transform to give a dataset: ``proxy(sample_input)`` (one input) or
        ``proxy(name=..., ...)``; returns one reference per pipeline output."""
        return self._proxy

    def start_thread(self) -> None:
        """Start running the pipeline (``with server:`` does it); nothing if already running."""
        if self._runner is not None and self._runner.running:
            return
        self._runner = _Runner(self._pipe, self._inputs)
        self._finalizer = weakref.finalize(self, self._runner.stop)

    def stop_thread(self) -> None:
        """Stop running the pipeline; outputs not yet taken are dropped."""
        if self._finalizer is not None:
            self._finalizer()
        self._runner = self._finalizer = None

    def _is_thread_running(self) -> bool:
        return self._runner is not None and self._runner.running

    def __enter__(self) -> DALIServer:
        self.start_thread()
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.stop_thread()
        return False

    def produce_data(self, obj: Any) -> Any:
        """``obj`` (a collated batch: any nesting of lists, tuples, named tuples, dicts and objects)
        with every :class:`DALIOutputBatchRef` replaced by its output tensor; lists, dicts and
        objects holding one are changed in place, tuples rebuilt, the rest left alone. Waits for
        each run."""
        return self._produce(obj, {}, {}, {})

    def _produce(self, obj: Any, done: dict[int, Any], holds: dict[int, bool], outputs: dict[int, tuple]) -> Any:
        key = id(obj)
        if key in done:
            return done[key]
        if isinstance(obj, DALIOutputBatchRef):
            run = obj.pipe_run_ref
            if id(run) not in outputs:
                outputs[id(run)] = self._outputs(run)
            done[key] = outputs[id(run)][obj.output_idx]
            return done[key]
        done[key] = obj  # before visiting members: a structure that refers to itself ends here
        if not _holds_ref(obj, holds):
            return obj
        if isinstance(obj, list):
            obj[:] = [self._produce(item, done, holds, outputs) for item in obj]
        elif isinstance(obj, tuple):
            items = [self._produce(item, done, holds, outputs) for item in obj]
            done[key] = obj._make(items) if hasattr(obj, "_fields") else type(obj)(items)
        elif isinstance(obj, dict):
            for k in list(obj):
                obj[k] = self._produce(obj[k], done, holds, outputs)
        else:
            for name, value in list(vars(obj).items()):
                if _holds_ref(value, holds):
                    setattr(obj, name, self._produce(value, done, holds, outputs))
        return done[key]

    def _outputs(self, run: DALIPipelineRunRef) -> tuple[torch.Tensor, ...]:
        runner = self._runner
        if runner is None or not runner.running:
            raise RuntimeError(
                "DALIServer is not running: use it as `with DALIServer(pipe) as server:` or call start_thread()"
            )
        if not run.is_scheduled:
            if not run.is_complete:
                raise RuntimeError(f"DALIServer: batch {run.batch_id} was not collated")
            self._proxy.send(run)
        return runner.take(run.batch_id)


def _holds_ref(obj: Any, memo: dict[int, bool]) -> bool:
    """Whether ``obj`` is or holds (in lists, tuples, dicts or object attributes) a batch reference."""
    key = id(obj)
    if key in memo:
        return memo[key]
    if isinstance(obj, DALIOutputBatchRef):
        memo[key] = True
        return True
    memo[key] = False  # a structure that refers to itself holds nothing more through that cycle
    if isinstance(obj, (str, bytes, np.ndarray, torch.Tensor)):
        return False
    if isinstance(obj, (list, tuple)):
        members: Any = obj
    elif isinstance(obj, dict):
        members = obj.values()
    else:
        members = getattr(obj, "__dict__", {}).values()
    memo[key] = any([_holds_ref(m, memo) for m in members])
    return memo[key]


class DataLoader(torch_data.DataLoader):
    """torch's ``DataLoader`` whose batches come with the pipeline's outputs in place of the
    proxy's references. The first argument is the :class:`DALIServer`, the rest torch's; the
    server starts with the first iteration if it is not running (and stops with the loader)."""

    def __init__(self, dali_server: DALIServer, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.dali_server = dali_server
        self._stop_server: weakref.finalize | None = None

    def __iter__(self) -> Iterator[Any]:
        server = self.dali_server
        if not server._is_thread_running():
            server.start_thread()
            self._stop_server = weakref.finalize(self, server.stop_thread)
        for batch in super().__iter__():
            yield server.produce_data(batch)
