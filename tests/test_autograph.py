"""The rewrite behind ``enable_conditionals=True`` (:mod:`raypipe.autograph`): which control flow it
turns into conditionals on pipeline data, what it leaves as Python wrote it, and that a rewritten
pipeline function runs in another process without its source."""

from __future__ import annotations

import linecache
import pickle
import subprocess
import sys
import traceback
import types as pytypes

import numpy as np
import pytest
from ray import cloudpickle

from raypipe import autograph, fn, pipeline_def, types
from tests.test_conditionals import _run


def _values(graph, *args, batch_size=8, batches=1):
    pipe = pipeline_def(graph, enable_conditionals=True, batch_size=batch_size, num_threads=1, device_id=None, seed=3)
    return _run(pipe(*args), batches)


class Jitter:
    """A user's augmentation object: its method and its ``__call__`` branch on pipeline data."""

    def __init__(self, amount):
        self.amount = amount

    def shift(self, x):
        if x < 5:
            return x + self.amount
        return x - self.amount

    def __call__(self, x):
        if fn.random.coin_flip(dtype=types.BOOL):
            x = self.shift(x) * 0
        return x


def _nested(x):
    if x < 5:
        if x < 2:
            return x * 0
        y = x + 1000
    else:
        y = x
        if x > 8:
            y = -x
    return y


def test_returns_inside_nested_ifs_and_fall_through_after_them():
    def graph():
        x = fn.random.uniform(range=[0, 10])
        return x, _nested(x)

    ((xs, ys),) = _values(graph, batch_size=32)
    for x, y in zip(xs, ys):
        expected = 0 if x < 2 else x + 1000 if x < 5 else -x if x > 8 else x
        assert np.isclose(y, expected), (x, y)


def test_methods_and_callable_objects_of_the_users_are_rewritten():
    def graph():
        x = fn.random.uniform(range=[0, 10])
        jitter = Jitter(100)
        return x, jitter.shift(x), jitter(x)

    ((xs, ys, zs),) = _values(graph, batch_size=16)
    assert all(np.isclose(y, x + 100 if x < 5 else x - 100) for x, y in zip(xs, ys))
    assert all(z == 0 or z == x for x, z in zip(xs, zs)) and 0 < sum(z == 0 for z in zs) < 16


def test_loops_run_as_python_and_ifs_inside_them_are_rewritten():
    def graph():
        start = x = fn.random.uniform(range=[0, 10])
        for step in range(3):
            if step == 1:
                continue
            if x < 5:
                x = x + 1
        return start, x

    ((starts, ends),) = _values(graph, batch_size=32)
    for start, end in zip(starts, ends):
        expected = start
        for _ in range(2):
            expected = expected + 1 if expected < 5 else expected
        assert np.isclose(end, expected), (start, end)


def test_what_is_left_as_written_raises_on_pipeline_data_naming_the_way_out():
    def with_while():
        x = fn.random.uniform(range=[0, 10])
        while x < 5:
            x = x + 1
        return x

    def with_expression():
        x = fn.random.uniform(range=[0, 10])
        return x + 1 if x < 5 else x

    def with_return_in_loop():
        x = fn.random.uniform(range=[0, 10])
        for _ in range(2):
            if x < 5:
                return x
        return x

    for graph in (with_while, with_expression, with_return_in_loop):
        with pytest.raises(TypeError, match="is pipeline data, not a truth value"):
            _values(graph)


def test_an_error_in_a_branch_points_at_the_users_line():
    def graph():
        x = fn.random.uniform(range=[0, 10], shape=[4, 4, 3])
        if x[0, 0, 0] < 5:
            x = fn.crop(x, crop=(2, 2), no_such_argument=1)
        return x

    with pytest.raises(Exception) as caught:
        _values(graph)
    frames = traceback.extract_tb(caught.value.__traceback__)
    line = graph.__code__.co_firstlineno + 3
    assert any(f.filename == __file__ and f.lineno == line for f in frames), [(f.filename, f.lineno) for f in frames]


def test_the_rewritten_function_keeps_name_defaults_and_closure():
    offset = 7

    def graph(scale=2, *, label="x"):
        """Doc."""
        x = fn.random.uniform(range=[0, 1])
        if x < 0.5:
            x = x * scale + offset
        return x

    rewritten = autograph.convert(graph)
    assert rewritten is not graph and rewritten.__name__ == "graph" and rewritten.__doc__ == "Doc."
    assert rewritten.__defaults__ == (2,) and rewritten.__kwdefaults__ == {"label": "x"}
    assert autograph.convert(rewritten) is rewritten, "a rewritten function is not rewritten again"
    assert autograph.convert(np.mean) is np.mean and autograph.convert(print) is print, "libraries stay"
    ((xs,),) = _values(graph, batch_size=16)
    assert all(0.5 <= v < 1 or 7 <= v < 8 for v in xs) and any(v >= 7 for v in xs)


# A script's module whose source exists only in this process (as a ``__main__`` module shipped by
# value to a Ray actor or a CPU helper): its helper branches on pipeline data.
MODULE = """
from raypipe import fn, types


def helper(x):
    if x < 5:
        return x * 100
    return x


def graph():
    x = fn.random.uniform(range=[0, 10])
    if fn.random.coin_flip(dtype=types.BOOL):
        x = helper(x)
    return x
"""

CHILD = """
import pickle, sys
import numpy as np
from raypipe import pipeline_def

graph = pickle.loads(sys.stdin.buffer.read())
pipe = pipeline_def(graph, batch_size=16, num_threads=1, device_id=None, seed=3)()
pipe.build()
(out,) = pipe.run()
sys.stdout.write(repr([float(np.asarray(out.at(i))) for i in range(len(out))]))
"""


def test_a_rewritten_pipeline_runs_in_another_process_without_its_source():
    filename = "<script without a file>"
    linecache.cache[filename] = (len(MODULE), None, MODULE.splitlines(keepends=True), filename)
    module = pytypes.ModuleType("__main__")
    try:
        exec(compile(MODULE, filename, "exec"), module.__dict__)
        pipe = pipeline_def(
            module.graph, enable_conditionals=True, batch_size=16, num_threads=1, device_id=None, seed=3
        )()
        pipe.build()
        (out,) = pipe.run()
        here = [float(np.asarray(out.at(i))) for i in range(len(out))]
        _settings, defined = pipe._graph_function().args  # the definition, run with the pipeline's settings
        shipped = cloudpickle.dumps(defined.func)
    finally:
        linecache.cache.pop(filename, None)
    child = subprocess.run([sys.executable, "-c", CHILD], input=shipped, capture_output=True, timeout=120, check=False)
    assert child.returncode == 0, child.stderr.decode()[-2000:]
    there = eval(child.stdout.decode())  # noqa: S307  (our own child's repr of floats)
    assert there == here and any(v >= 100 for v in here), "the helper was rewritten there too"
    assert pickle.loads(shipped) is not None


def test_a_function_whose_source_cannot_be_read_warns_and_runs_as_written():
    namespace = {"fn": fn}
    exec(  # noqa: S102  (a function as python -c or a prompt defines one: no source to read)
        "def graph():\n    x = fn.random.uniform(range=[0, 1])\n    return x * 2\n", namespace
    )
    with pytest.warns(UserWarning, match="the source of graph cannot be read"):
        pipe = pipeline_def(namespace["graph"], enable_conditionals=True, batch_size=2, num_threads=1, device_id=None)()
    pipe.build()
    (out,) = pipe.run()
    assert all(0 <= float(np.asarray(v)) < 2 for v in (out.at(0), out.at(1)))


def _source_factory(size):
    def source(info):
        return np.full(size, info.idx_in_epoch, dtype=np.int32)

    return source


def test_do_not_convert_keeps_a_function_as_written():
    from raypipe.pipeline import do_not_convert

    kept = do_not_convert(_source_factory)
    assert do_not_convert()(kept) is kept and autograph.convert(kept) is kept

    def graph():
        return fn.external_source(source=kept((2,)), batch=False)

    ((values,),) = _values(graph, batch_size=3)
    assert [v.tolist() for v in values] == [[0, 0], [1, 1], [2, 2]]
