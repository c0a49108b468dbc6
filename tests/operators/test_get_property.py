"""``get_property`` against DALI 2.4's CPU build where installed: ``source_info`` of a file reader's
data, of what is computed from it, and of labels and external sources (empty); ``layout`` of
decoded images and of a source with a layout; under shuffling and sharding every sample's source is
the file its bytes came from; bad keys fail when the pipeline is built."""

from __future__ import annotations

import numpy as np
import pytest

import raypipe as rp
from raypipe import fn
from raypipe.errors import ArgumentError


def _graph(f, reader_kwargs: dict):
    jpegs, labels = f.readers.file(**reader_kwargs)
    images = f.decoders.image(jpegs)
    small = f.resize(images, resize_x=8, resize_y=6)
    extra = f.external_source(source=lambda: [np.zeros(3, np.uint8)] * 4, batch=True, layout="A")
    return (
        f.get_property(jpegs, key="source_info"),
        f.get_property(small, key="source_info"),
        f.get_property(labels, key="source_info"),
        f.get_property(extra, key="source_info"),
        f.get_property(images, key="layout"),
        f.get_property(extra, key="layout"),
    )


def _texts(outputs) -> list[list[bytes]]:
    return [
        [np.asarray(out.as_cpu().at(i) if hasattr(out, "as_cpu") else out[i]).tobytes() for i in range(4)]
        for out in outputs
    ]


def _reader_args(source: str, jpeg_root: str, jpeg_files: list[str], folder) -> dict:
    """readers.file's arguments for the first 4 JPEGs, listed each way DALI lists files."""
    relative = [p[len(jpeg_root) + 1 :] for p in jpeg_files[:4]]
    if source == "files":
        return {"files": jpeg_files[:4]}
    if source == "file_root":
        return {"file_root": jpeg_root}
    lines = {"list+root": relative, "list beside": relative, "list absolute": jpeg_files[:4]}[source]
    listed = folder / "list.txt"
    listed.write_text("".join(f"{line} {k}\n" for k, line in enumerate(lines)))
    if source == "list beside":  # relative lines are read from the list's folder
        for rel in relative:
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(open(f"{jpeg_root}/{rel}", "rb").read())
    return {"file_list": str(listed), **({"file_root": jpeg_root} if source == "list+root" else {})}


@pytest.mark.parametrize("source", ["files", "file_root", "list+root", "list beside", "list absolute"])
def test_source_info_and_layout_are_dalis(jpeg_root, jpeg_files, tmp_path, source):
    dali = pytest.importorskip("nvidia.dali")
    reader = _reader_args(source, jpeg_root, jpeg_files, tmp_path)

    @rp.pipeline_def(batch_size=4, num_threads=1, seed=0)
    def ours():
        return _graph(fn, reader)

    @dali.pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=0)
    def theirs():
        return _graph(dali.fn, reader)

    with ours() as p:
        mine = _texts(p.run())
    pipe = theirs()
    pipe.build()
    assert mine == _texts(pipe.run())
    relative = [p[len(jpeg_root) + 1 :].encode() for p in jpeg_files[:4]]
    absolute = [p.encode() for p in jpeg_files[:4]]
    assert mine[0] == (absolute if source in ("files", "list absolute") else relative)
    assert mine[4] == [b"HWC"] * 4 and mine[5] == [b"A"] * 4 and mine[2] == mine[3] == [b""] * 4


@pytest.mark.parametrize("shard_id", [0, 1])
def test_each_sample_names_the_file_its_bytes_came_from(jpeg_root, shard_id):
    @rp.pipeline_def(batch_size=4, num_threads=2, seed=3)
    def pipe():
        jpegs, _ = fn.readers.file(file_root=jpeg_root, random_shuffle=True, shard_id=shard_id, num_shards=2)
        return jpegs, fn.get_property(jpegs, key="source_info")

    seen = []
    with pipe() as p:
        for _ in range(3):
            data, info = p.run()
            for i in range(4):
                path = np.asarray(info.at(i)).tobytes().decode()
                assert open(f"{jpeg_root}/{path}", "rb").read() == np.asarray(data.at(i)).tobytes(), path
                seen.append(path)
    assert len(set(seen)) == 12, "one shard's 12 files over three batches"


def test_the_output_is_bytes_without_a_layout(ours):
    ((samples, layout),) = ours([np.zeros((2, 3), np.float32)], lambda x: fn.get_property(x, key="layout"), layout="HW")
    assert layout == "" and samples[0].dtype == np.uint8 and samples[0].tobytes() == b"HW"


@pytest.mark.parametrize("key", [None, "size", "Layout"])
def test_a_bad_key_fails_when_the_pipeline_is_built(key):
    @rp.pipeline_def(batch_size=1, num_threads=1)
    def pipe():
        data = fn.external_source(source=lambda: [np.zeros(1, np.uint8)], batch=True)
        return fn.get_property(data) if key is None else fn.get_property(data, key=key)

    with pytest.raises(ArgumentError, match=r"get_property: key must be one of \['source_info', 'layout'\]"):
        pipe().build()


def _tensor_graph(f, reader_kwargs: dict):
    jpegs, labels = f.readers.file(**reader_kwargs)
    images = f.decoders.image(jpegs)
    return f.resize(images, resize_x=8, resize_y=6), labels, images * 2


def _tensor_properties(outputs) -> list[list[tuple]]:
    return [
        [(t.source_info(), t.get_property("source_info"), t.get_property("layout")) for t in (out[i] for i in range(4))]
        for out in outputs
    ]


@pytest.mark.parametrize("source", ["files", "file_root"])
def test_a_pipeline_outputs_samples_know_their_source_as_dalis_tensors(jpeg_root, jpeg_files, tmp_path, source):
    """DALI's ``tl[i].source_info()`` and ``get_property(key)`` on a pipeline's outputs: a file reader's
    data and what is computed from it name the file; labels name nothing (``get_property`` gives None)."""
    dali = pytest.importorskip("nvidia.dali")
    reader = _reader_args(source, jpeg_root, jpeg_files, tmp_path)

    @rp.pipeline_def(batch_size=4, num_threads=1, seed=0)
    def ours():
        return _tensor_graph(fn, reader)

    @dali.pipeline_def(batch_size=4, num_threads=1, device_id=None, seed=0)
    def theirs():
        return _tensor_graph(dali.fn, reader)

    with ours() as p:
        mine = _tensor_properties(p.run())
    pipe = theirs()
    pipe.build()
    assert mine == _tensor_properties(pipe.run())
    assert mine[1] == [("", None, None)] * 4 and [layout for _, _, layout in mine[0]] == ["HWC"] * 4


def test_each_output_row_names_the_file_its_bytes_came_from(jpeg_files):
    """Shuffled and on the GPU side of a pipeline too (``as_cpu()`` keeps it): a row's ``source_info()``
    is the file whose bytes the reader gave that row."""

    @rp.pipeline_def(batch_size=4, num_threads=2, seed=5)
    def pipe():
        jpegs, _ = fn.readers.file(files=jpeg_files[:8], random_shuffle=True, initial_fill=8)
        return jpegs, fn.decoders.image(jpegs).gpu()

    with pipe() as p:
        for _ in range(3):
            raw, images = p.run()
            for i in range(4):
                source = raw[i].source_info()
                assert open(source, "rb").read() == np.asarray(raw[i]).tobytes()
                assert images.as_cpu()[i].source_info() == source
