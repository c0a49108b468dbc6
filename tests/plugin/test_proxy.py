"""DALI's proxy: a torch DataLoader's worker processes give each sample's pipeline inputs, the main
process runs the pipeline per collated batch (``raypipe.plugin.pytorch.experimental.proxy``)."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset, default_collate

import raypipe as rp
from raypipe import fn, types
from raypipe.errors import ArgumentError
from raypipe.plugin.pytorch.experimental import proxy as dali_proxy


@rp.pipeline_def(batch_size=5, num_threads=2, device_id=None, seed=0)
def rn50_eval_pipe():
    """DALI's proxy example, without its random crop: file paths in, images out."""
    paths = fn.external_source(name="images", no_copy=True)
    jpegs = fn.io.file.read(paths)
    images = fn.decoders.image(jpegs, output_type=types.RGB)
    images = fn.resize(images, size=[32, 32])
    return fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=[128.0], std=[64.0])


def read_filepath(path: str) -> np.ndarray:
    return np.frombuffer(path.encode(), dtype=np.int8)


class ImageFolder(Dataset):
    """torchvision's ImageFolder in short: (transform(loader(path)), class index)."""

    def __init__(self, files: list[str], transform):
        self.files, self.transform = files, transform

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        path = self.files[i]
        return self.transform(read_filepath(path)), int(os.path.basename(os.path.dirname(path)).split("_")[1])


def expected_images(files: list[str]) -> torch.Tensor:
    """The same pipeline run on the paths directly, 5 at a time."""
    with rn50_eval_pipe() as pipe:
        out = []
        for start in range(0, len(files), 5):
            (images,) = pipe.run(images=[read_filepath(p) for p in files[start : start + 5]])
            out += [torch.from_numpy(np.array(images.at(i))) for i in range(len(images))]
    return torch.stack(out)


@pytest.mark.parametrize("deterministic", [False, True])
def test_a_dataloaders_workers_feed_the_pipeline_batch_by_batch(jpeg_files, deterministic):
    want = expected_images(jpeg_files)
    labels = [int(os.path.basename(os.path.dirname(p)).split("_")[1]) for p in jpeg_files]
    with dali_proxy.DALIServer(rn50_eval_pipe(), deterministic=deterministic) as server:
        dataset = ImageFolder(jpeg_files, transform=server.proxy)
        loader = dali_proxy.DataLoader(server, dataset, batch_size=5, num_workers=2, shuffle=False)
        for _ in range(2):  # a second epoch through the same workers' proxies
            got_images, got_labels = [], []
            for images, target in loader:
                assert isinstance(images, torch.Tensor) and images.dtype == torch.float32
                got_images.append(images)
                got_labels += target.tolist()
            assert [len(b) for b in got_images] == [5, 5, 5, 5, 4], "24 samples: the last batch has 4"
            assert got_labels == labels
            torch.testing.assert_close(torch.cat(got_images), want)


def test_produce_data_fills_a_batch_collated_by_hand(jpeg_files):
    """DALI's second example: the proxy called in this thread, torch's default_collate, then
    ``produce_data`` on a structure holding the references."""

    @rp.pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def two_inputs():
        a = fn.external_source(name="a", no_copy=True)
        b = fn.external_source(name="b", no_copy=True)
        return a + b, a - b

    rng = np.random.default_rng(0)
    with dali_proxy.DALIServer(two_inputs()) as server:
        rows = []
        for _ in range(4):
            a, b = rng.random((3, 3), dtype=np.float32), rng.random((3, 3), dtype=np.float32)
            plus, minus = server.proxy(a=a, b=b)
            rows.append({"inputs": (a, b), "outputs": [plus, minus]})
        batch = server.produce_data(default_collate(rows))
    a, b = batch["inputs"]
    torch.testing.assert_close(batch["outputs"][0], a + b)
    torch.testing.assert_close(batch["outputs"][1], a - b)


def test_a_failing_batch_raises_naming_it_and_later_batches_run(jpeg_files, tmp_path):
    missing = str(tmp_path / "class_000" / "gone.jpg")
    files = jpeg_files[:5] + [missing] + jpeg_files[6:10]
    with dali_proxy.DALIServer(rn50_eval_pipe()) as server:
        loader = dali_proxy.DataLoader(server, ImageFolder(files, server.proxy), batch_size=5, num_workers=0)
        batches = iter(loader)
        assert next(batches)[0].shape == (5, 3, 32, 32)
        with pytest.raises(RuntimeError, match=r"failed on batch .*gone\.jpg"):
            next(batches)
    with dali_proxy.DALIServer(rn50_eval_pipe()) as server:
        loader = dali_proxy.DataLoader(server, ImageFolder(jpeg_files[:10], server.proxy), batch_size=5)
        assert [images.shape[0] for images, _ in loader] == [5, 5], "a new server over a new pipeline runs"


def test_bad_use_fails_clearly(jpeg_files):
    @rp.pipeline_def(batch_size=2, num_threads=1, device_id=None)
    def sourced():
        return fn.external_source(source=lambda: [np.zeros(1)] * 2)

    with pytest.raises(ArgumentError, match="no external source to feed"):
        dali_proxy.DALIServer(sourced())
    with pytest.raises(TypeError, match="expected a raypipe Pipeline"):
        dali_proxy.DALIServer(object())
    server = dali_proxy.DALIServer(rn50_eval_pipe())
    with pytest.raises(TypeError, match=r"unknown \['paths'\]"):
        server.proxy(paths=read_filepath(jpeg_files[0]))
    batch = default_collate([server.proxy(read_filepath(p)) for p in jpeg_files[:2]])
    with pytest.raises(RuntimeError, match="DALIServer is not running"):
        server.produce_data(batch)
    reversed_rows = torch.utils.data.DataLoader(
        ImageFolder(jpeg_files[:4], server.proxy), batch_size=2, collate_fn=lambda rows: default_collate(rows[::-1])
    )
    with server, pytest.raises(RuntimeError, match="reordered, mixed or left out"):
        next(iter(reversed_rows))


def test_the_runner_thread_stops_with_its_server(jpeg_files):
    def runners() -> int:
        return sum(t.name == "raypipe-dali-proxy" for t in threading.enumerate())

    before = runners()
    server = dali_proxy.DALIServer(rn50_eval_pipe())
    server.start_thread()
    assert runners() == before + 1
    server.stop_thread()
    assert runners() == before, "stop_thread"
    server.start_thread()
    del server
    assert runners() == before, "dropped"
    loader = dali_proxy.DataLoader(
        dali_proxy.DALIServer(rn50_eval_pipe()), ImageFolder(jpeg_files[:5], None), batch_size=5
    )
    loader.dataset.transform = loader.dali_server.proxy
    assert [images.shape[0] for images, _ in loader] == [5]
    assert runners() == before + 1, "started by the loader"
    del loader
    assert runners() == before, "stopped with the loader that started it"


@rp.pipeline_def(batch_size=4, num_threads=1, device_id=None)
def doubled():
    return fn.external_source(name="x", no_copy=True) * 2


class Numbers(Dataset):
    def __init__(self, transform):
        self.transform = transform

    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int):
        return self.transform(np.array([i], np.float32)), i


def test_spawned_workers_take_the_proxy_too():
    """A DataLoader whose workers are spawned, shuffled, kept across epochs."""
    with dali_proxy.DALIServer(doubled()) as server:
        loader = dali_proxy.DataLoader(
            server, Numbers(server.proxy), batch_size=4, num_workers=1, multiprocessing_context="spawn",
            shuffle=True, persistent_workers=True,
        )  # fmt: skip
        for _ in range(2):
            batches = list(loader)
            assert all(torch.equal(x.ravel(), 2 * i.float()) for x, i in batches)
            assert sorted(int(i) for _, b in batches for i in b) == list(range(10))
