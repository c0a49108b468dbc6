"""Conditional execution on pipeline data (:mod:`raypipe.conditionals`): ``if``, ``and``, ``or`` and
``not`` in ``@pipeline_def(enable_conditionals=True)`` functions, against DALI 2.4's CPU build where
the values are deterministic, and by their distributions where they are drawn."""

from __future__ import annotations

import numpy as np
import pytest

from raypipe import fn, pipeline_def, types
from raypipe.backend import gpu_available
from raypipe.errors import PipelineDefinitionError
from tests.script_harness import as_dali_cpu, run_script

# Every construct on data-dependent conditions whose outputs do not depend on random draws: DALI and
# raypipe must give the same values. The source makes 12 samples per epoch (an image of a sample's
# own values, its label); the pipeline branches on the label.
SCRIPT = """
import numpy as np
from nvidia.dali import fn, pipeline_def, types


def source(info):
    i = info.idx_in_epoch % 12
    image = (np.arange(4 * 6 * 3, dtype=np.int32).reshape(4, 6, 3) * (i + 1) % 251).astype(np.uint8)
    return image, np.int32(i)


def darker(images, labels):
    if labels % 3 == 0:
        return fn.cast(images // 2, dtype=types.UINT8)
    return images


@pipeline_def(batch_size=BATCH, num_threads=2, device_id=0, enable_conditionals=True)
def pipe():
    images, labels = fn.external_source(source=source, num_outputs=2, batch=False, layout=["HWC", ""])
    even = labels % 2 == 0
    if even:
        images = fn.flip(images, horizontal=1)
        scale = 2
    elif labels > 6:
        images = fn.flip(images, horizontal=1, vertical=1)
        scale = 3
    else:
        images = fn.flip(images, vertical=1)
        scale = 5
    images = darker(images, labels)
    if not even and labels < 4 or labels == 10:
        tag = labels * scale
    else:
        tag = labels - scale
    pair = (images, labels)
    if labels >= 9:
        pair = (fn.crop(images, crop=(2, 2), crop_pos_x=0.0, crop_pos_y=0.0), labels + 100)
    return pair[0], pair[1], tag, scale


p = pipe()
p.build()
RESULT = {"batches": []}
for _ in range(3):
    outs = p.run()
    RESULT["batches"].append([[np.array(o.at(i)) for i in range(len(o))] for o in outs])
"""


@pytest.mark.parametrize("batch", [4, 5])
def test_if_else_elif_and_or_not_and_early_returns_give_dalis_values(batch):
    ours = run_script(
        SCRIPT.replace("nvidia.dali", "raypipe").replace("device_id=0", "device_id=None"), "", BATCH=batch
    )
    outputs = [[o[i] for o in batch_] for batch_ in ours["batches"] for i in range(batch)]
    for position, (image, label, tag, scale) in enumerate(outputs):
        expected = _expected(position % 12)
        assert [np.array_equal(a, b) for a, b in zip((image, label, tag, scale), expected)] == [True] * 4, position
    pytest.importorskip("nvidia.dali")
    theirs = run_script(as_dali_cpu(SCRIPT), "", BATCH=batch)
    for mine, reference in zip(ours["batches"], theirs["batches"], strict=True):
        for output, (a, b) in enumerate(zip(mine, reference, strict=True)):
            for sample, (x, y) in enumerate(zip(a, b, strict=True)):
                assert x.dtype == y.dtype and x.shape == y.shape, (output, sample, x.dtype, y.dtype, x.shape, y.shape)
                assert np.array_equal(x, y), (output, sample)


def _expected(i: int) -> tuple:
    """What SCRIPT's pipeline gives sample ``i``, computed with numpy."""
    image = (np.arange(4 * 6 * 3, dtype=np.int32).reshape(4, 6, 3) * (i + 1) % 251).astype(np.uint8)
    if i % 2 == 0:
        image, scale = image[:, ::-1], 2
    elif i > 6:
        image, scale = image[::-1, ::-1], 3
    else:
        image, scale = image[::-1, ::-1], 5  # flip's horizontal=1 is its default
    if i % 3 == 0:
        image = (image.astype(np.int32) // 2).astype(np.uint8)
    tag = i * scale if (i % 2 == 1 and i < 4) or i == 10 else i - scale
    label = i
    if i >= 9:
        image, label = image[:2, :2], i + 100
    return image, np.int32(label), np.int32(tag), np.int32(scale)


def _pipe(graph, batch_size=8, device_id=None, **kwargs):
    return pipeline_def(graph, batch_size=batch_size, num_threads=2, device_id=device_id, seed=5, **kwargs)()


def _run(pipe, batches=2):
    pipe.build()
    out = []
    for _ in range(batches):
        out.append([[np.asarray(o.as_cpu().at(i)) for i in range(len(o))] for o in pipe.run()])
    return out


def test_a_branch_draws_for_its_own_samples_from_their_own_streams():
    def graph():
        coin = fn.random.coin_flip(dtype=types.BOOL, probability=0.5)
        if coin:
            value = fn.random.uniform(range=[10, 20])
        else:
            value = fn.random.uniform(range=[-20, -10])
        return coin, value

    first = _run(pipeline_def(graph, enable_conditionals=True, batch_size=16, num_threads=1, device_id=None, seed=5)())
    again = _run(
        pipeline_def(graph, enable_conditionals=True, batch_size=4, num_threads=2, device_id=None, seed=5)(), 8
    )
    coins = np.array([bool(c) for b in first for c in b[0]])
    values = np.array([float(v) for b in first for v in b[1]])
    assert coins.any() and not coins.all()
    assert ((values >= 10) == coins).all() and ((values <= -10) == ~coins).all()
    regrouped = np.array([float(v) for b in again for v in b[1]])
    assert np.array_equal(values, regrouped), "a sample's draws do not depend on its batch or branch-mates"


def test_the_gpu_stage_runs_each_branch_once_per_batch_on_its_samples(monkeypatch):
    from raypipe.subgraph import Subgraph

    def graph():
        images = fn.random.uniform(range=[0, 255], shape=[8, 8, 3], dtype=types.UINT8)
        labels = fn.random.uniform(range=[0, 10], dtype=types.INT32)
        images = images.gpu()
        if labels < 5:
            images = fn.flip(images, horizontal=1)
            images = fn.cast(images, dtype=types.FLOAT) * 0.5
            note = labels
        else:
            images = fn.cast(images, dtype=types.FLOAT) + fn.random.uniform(range=[0, 1])
            note = labels + 100
        return images, note

    on_host = _run(pipeline_def(graph, enable_conditionals=True, batch_size=8, num_threads=2, device_id=None, seed=5)())
    calls = []
    run_batch = Subgraph.run_batch

    def spy(self, xp, values, ctxs):
        calls.append(len(ctxs))
        return run_batch(self, xp, values, ctxs)

    monkeypatch.setattr(Subgraph, "run_batch", spy)
    monkeypatch.setenv("RAYPIPE_DEVICE", "simulator")
    pipe = pipeline_def(graph, enable_conditionals=True, batch_size=8, num_threads=2, device_id=0, seed=5)()
    assert pipe.device_report is not None
    staged = _run(pipe)
    batches = -(-sum(calls) // 8)  # the batches run, with those prefetched (the last may be cut short)
    assert max(calls) > 1 and len(calls) <= 2 * batches, f"each branch once per batch, on its samples: {calls}"
    for mine, reference in zip(staged, on_host):
        for a, b in zip(mine, reference):
            for x, y in zip(a, b):
                assert np.allclose(np.asarray(x), y, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_branches_give_the_host_results(jpeg_files):
    """On cupy, each branch's samples go through it together (ragged decoded images, then resized
    ones): the host's values."""

    def graph(files):
        jpegs, labels = fn.readers.file(files=files, labels=[i % 3 for i in range(len(files))])
        images = fn.decoders.image(jpegs, device="mixed")
        if labels == 1:
            images = fn.flip(images, horizontal=1)
        images = fn.resize(images, resize_x=16, resize_y=12)
        if labels != 2 or fn.random.coin_flip(dtype=types.BOOL):
            images = fn.cast(images, dtype=types.FLOAT) * 0.5
        else:
            images = fn.cast(images, dtype=types.FLOAT)
        return images, labels

    files = jpeg_files[:12]
    make = pipeline_def(graph, enable_conditionals=True, batch_size=6, num_threads=2, seed=5)
    for host, device in zip(_run(make(files, device_id=None)), _run(make(files, device_id=0))):
        for a, b in zip(host, device):
            for x, y in zip(a, b):
                assert x.shape == y.shape and np.allclose(x, y, atol=1.0)


def test_a_variable_set_in_one_branch_only_is_an_error_when_used():
    def graph():
        labels = fn.random.uniform(range=[0, 10], dtype=types.INT32)
        if labels < 5:
            extra = labels * 2
        return extra

    with pytest.raises(PipelineDefinitionError, match="'extra' is assigned in one branch .* `else` branch too"):
        _pipe(graph, enable_conditionals=True).build()

    def graph_used_in_branch_only():
        labels = fn.random.uniform(range=[0, 10], dtype=types.INT32)
        if labels < 5:
            tmp = labels * 2
            labels = tmp + 1
        return labels

    (batch,) = _run(_pipe(graph_used_in_branch_only, enable_conditionals=True), 1)[0:1]
    assert all(int(v) % 2 == 1 or int(v) >= 5 for v in batch[0]), "a temporary of one branch is fine"


def test_a_return_in_one_branch_only_is_an_error():
    def graph():
        labels = fn.random.uniform(range=[0, 10], dtype=types.INT32)
        if labels < 5:
            return labels

    with pytest.raises(PipelineDefinitionError, match="`else` branch .* has no return statement"):
        _pipe(graph, enable_conditionals=True).build()


def test_conditions_must_be_on_the_cpu_and_one_bool_per_sample():
    def on_gpu():
        labels = fn.random.uniform(range=[0, 10]).gpu()
        if labels < 5:
            labels = labels + 1
        return labels

    with pytest.raises(PipelineDefinitionError, match="conditions must be computed on the CPU"):
        _pipe(on_gpu, enable_conditionals=True).build()

    def floats():
        x = fn.random.uniform(range=[0, 10])
        if x:
            x = x + 1
        return x

    with pytest.raises(Exception, match="one bool per sample .* sample 0 has float32"):
        _run(_pipe(floats, enable_conditionals=True), 1)


def test_logical_operands_on_the_gpu_are_refused():
    def graph():
        x = fn.random.uniform(range=[0, 10])
        y = (x > 5).gpu()
        if x < 5 or y:
            x = x + 1
        return x

    with pytest.raises(PipelineDefinitionError, match="an operand of `and`/`or` is on the GPU"):
        _pipe(graph, enable_conditionals=True).build()


def test_values_that_cannot_be_merged_are_named():
    def graph():
        x = fn.random.uniform(range=[0, 10])
        if x < 5:
            kind = "low"
        else:
            kind = "high"
        return x, kind

    with pytest.raises(PipelineDefinitionError, match="variable 'kind' is 'low' in the if branch and 'high'"):
        _pipe(graph, enable_conditionals=True).build()

    def shapes():
        x = fn.random.uniform(range=[0, 10])
        if x < 5:
            pair = (x, x)
        else:
            pair = [x]
        return pair[0]

    with pytest.raises(PipelineDefinitionError, match="variable 'pair'"):
        _pipe(shapes, enable_conditionals=True).build()


def test_items_or_attributes_assigned_in_branches_on_pipeline_data_are_refused_by_name():
    def graph():
        x = fn.random.uniform(range=[0, 10])
        out = {"x": x}
        if x < 5:
            out["x"] = x + 1
        return out["x"]

    with pytest.raises(PipelineDefinitionError, match=r"assign to out\['x'\]; both branches"):
        _pipe(graph, enable_conditionals=True).build()

    def on_python_values(flag=True):
        x = fn.random.uniform(range=[0, 10])
        out = {"x": x}
        if flag:
            out["x"] = x + 100
        return out["x"]

    ((values,),) = _run(_pipe(on_python_values, enable_conditionals=True), 1)
    assert all(v >= 100 for v in values), "on a Python condition, Python's meaning"


def test_data_made_in_a_branch_that_escapes_other_than_by_a_variable_is_refused():
    def graph():
        x = fn.random.uniform(range=[0, 10])
        made = []
        if x < 5:
            made.append(x + 1)
        else:
            made.append(x - 1)
        return made[0] * 2

    with pytest.raises(PipelineDefinitionError, match="made inside a branch of the `if` .* assign it to a variable"):
        _pipe(graph, enable_conditionals=True).build()


def test_without_enable_conditionals_an_if_on_pipeline_data_says_how_to_enable_it():
    def graph():
        x = fn.random.uniform(range=[0, 10])
        if x < 5:
            x = x + 1
        return x

    with pytest.raises(TypeError, match=r"enable_conditionals=True"):
        _pipe(graph).build()


def _tilted(x, focal):
    """A helper with Python values set in one branch only, as public scripts write them (DALI merges
    only the variables used after the ``if``)."""
    scale = 1.0
    if x > 5:
        focal = float(focal if focal is not None else 10.0)
        scale = x / focal
    return x * scale


def test_python_values_of_one_branch_are_no_error_until_used():
    def graph():
        x = fn.random.uniform(range=[0, 10])
        return x, _tilted(x, None)

    ((xs, scaled),) = _run(_pipe(graph, enable_conditionals=True), 1)
    for x, y in zip(xs, scaled, strict=True):
        assert np.isclose(y, x * x / 10.0 if x > 5 else x)

    def used():
        x = fn.random.uniform(range=[0, 10])
        focal = None
        if x > 5:
            focal = 10.0
        return x * focal

    with pytest.raises(PipelineDefinitionError, match="variable 'focal' is 10.0 in the if branch and None"):
        _pipe(used, enable_conditionals=True).build()


def test_a_converted_call_may_pass_its_own_function_argument():
    """``fn.python_function(..., function=...)`` inside a function the conditionals rewrite."""

    def helper(x):
        return fn.python_function(x, function=lambda v: v * 2, num_outputs=1)

    def graph():
        x = fn.random.uniform(range=[0, 10])
        if x > 5:
            y = helper(x)
        else:
            y = x
        return x, y

    ((xs, ys),) = _run(_pipe(graph, enable_conditionals=True), 1)
    for x, y in zip(xs, ys, strict=True):
        assert np.isclose(y, 2 * x if x > 5 else x)


def test_branches_that_give_a_variable_two_types_are_an_error_naming_it():
    def graph():
        images = fn.random.uniform(range=[0, 255], shape=[4, 4, 3], dtype=types.UINT8)
        if fn.random.coin_flip(dtype=types.BOOL):
            images = images // 2  # int32, as in DALI
        return images

    with pytest.raises(Exception, match="variable 'images' is .* in the if branch and .* in the else branch"):
        _run(_pipe(graph, enable_conditionals=True, batch_size=16), 1)


def test_python_conditions_keep_pythons_meaning():
    def graph(flip, mode):
        x = fn.random.uniform(range=[0, 10], shape=[2])
        if flip and mode == "add":
            x = x + 100
        elif not flip:
            return x * 0
        values = [v for v in (1, 2, 3) if v > 1 and v != 3]
        return x + values[0]

    def run(*args):
        pipe = pipeline_def(graph, enable_conditionals=True, batch_size=4, num_threads=1, device_id=None, seed=5)
        return [np.asarray(v) for v in _run(pipe(*args), 1)[0][0]]

    assert all(((v >= 102) & (v < 112)).all() for v in run(True, "add"))
    assert all(((v >= 2) & (v < 12)).all() for v in run(True, "sub"))
    assert all((v == 0).all() for v in run(False, "add"))


def test_device_report_judges_a_conditional_by_the_operators_in_its_branches(monkeypatch):
    monkeypatch.setenv("RAYPIPE_DEVICE", "simulator")

    def graph():
        x = fn.random.uniform(range=[0, 10], shape=[4, 4, 3], dtype=types.UINT8).gpu()
        if fn.random.coin_flip(dtype=types.BOOL):
            x = fn.flip(x)
        return x

    pipe = _pipe(graph, enable_conditionals=True, device_id=0)
    pipe.build()
    report = pipe.device_report()
    assert report["operators"] == {"'_conditional'#3": "simulator"}, report


def test_a_pipeline_resumed_from_a_checkpoint_takes_the_same_branches(jpeg_files):
    @pipeline_def(enable_conditionals=True, enable_checkpointing=True, batch_size=4, num_threads=2, seed=9)
    def train(files):
        jpegs, labels = fn.readers.file(files=files, random_shuffle=True, name="Reader")
        images = fn.decoders.image(jpegs)
        images = fn.resize(images, resize_x=16, resize_y=16)
        if fn.random.coin_flip(dtype=types.BOOL, probability=0.5):
            images = fn.flip(images, horizontal=1)
            images = fn.color_twist(images, brightness=fn.random.uniform(range=[0.5, 1.5]))
        return images, labels

    def batches(pipe, count):
        return [[np.asarray(o.at(i)).copy() for o in pipe.run() for i in range(len(o))] for _ in range(count)]

    first = train(jpeg_files[:12], device_id=None)
    first.build()
    batches(first, 2)
    checkpoint = first.checkpoint()
    expected = batches(first, 3)
    resumed = train(jpeg_files[:12], device_id=None, checkpoint=checkpoint)
    resumed.build()
    for a, b in zip(batches(resumed, 3), expected):
        assert all(np.array_equal(x, y) for x, y in zip(a, b))


def _count_batch(values):
    """A batch function: each sample plus the number of samples in its batch."""
    return [np.float32(v) + np.float32(len(values)) for v in values]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_a_batch_python_function_in_a_branch_gets_the_samples_of_the_branch(device):
    """As DALI: a branch holding an operator that needs the whole batch runs once on the group of
    samples it takes (the ``if`` becomes a batch step), with ``.gpu()`` inside the branch too."""

    def graph():
        x = fn.random.uniform(range=[0, 10])
        if x > 5:
            y = fn.python_function(x, function=_count_batch, batch_processing=True, num_outputs=1)
            y = y.gpu() if device == "gpu" else y
        else:
            y = x.gpu() if device == "gpu" else x
        return x, y

    ((xs, ys),) = _run(_pipe(graph, batch_size=16, enable_conditionals=True), 1)
    taken = sum(1 for x in xs if x > 5)
    assert 0 < taken < 16
    for x, y in zip(xs, ys, strict=True):
        assert np.isclose(y, x + taken if x > 5 else x)


def test_gpu_inside_a_branch_moves_that_branchs_samples():
    def graph():
        x = fn.random.uniform(range=[0, 10])
        if x > 5:
            y = (x * 2).gpu()
        else:
            y = x.gpu()
        return x, y

    ((xs, ys),) = _run(_pipe(graph, enable_conditionals=True), 1)
    for x, y in zip(xs, ys, strict=True):
        assert np.isclose(y, 2 * x if x > 5 else x)
