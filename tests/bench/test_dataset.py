"""The benchmark's files: all of a folder, an even spread of it, or generated and cached."""

from __future__ import annotations

import os

from raypipe.bench.dataset import prepare
from raypipe.operators.readers import list_file_root


def test_a_folder_is_used_as_it_is_when_it_holds_no_more_than_asked(jpeg_root):
    dataset = prepare(jpeg_root, 100)
    assert dataset.root == jpeg_root and dataset.paths == list_file_root(jpeg_root)[0]
    assert dataset.source == jpeg_root
    assert 400 < dataset.mean_width < 600 and 300 < dataset.mean_height < 450
    assert dataset.mean_megapixels * 1e6 > 0.9 * dataset.mean_width * dataset.mean_height
    assert dataset.as_dict()["images"] == 24 and "paths" not in dataset.as_dict()


def test_fewer_images_are_an_even_spread_hard_linked_once(jpeg_root, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    dataset = prepare(jpeg_root, 10)
    assert dataset.root.startswith(str(tmp_path)) and len(dataset.paths) == 10
    assert dataset.source == f"10 of the 24 JPEGs of {jpeg_root}"
    originals = {os.path.relpath(p, jpeg_root): p for p in list_file_root(jpeg_root)[0]}
    chosen = [os.path.relpath(p, dataset.root) for p in dataset.paths]
    assert len({c.split(os.sep)[0] for c in chosen}) == 4, "every class"
    assert all(os.path.samefile(os.path.join(dataset.root, c), originals[c]) for c in chosen)
    assert prepare(jpeg_root, 10).root == dataset.root, "made once"


def test_without_a_folder_jpegs_are_generated_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    dataset = prepare(None, 16)
    assert len(dataset.paths) == 16 and dataset.root == str(tmp_path / "raypipe" / "bench" / "generated-16")
    assert 320 <= dataset.mean_width <= 640 and 240 <= dataset.mean_height <= 480
    assert dataset.source.startswith("generated")
    assert not [p for p in os.listdir(tmp_path / "raypipe" / "bench") if ".tmp-" in p]
