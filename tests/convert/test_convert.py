"""``raypipe convert`` and ``raypipe index`` on real JPEG folders: every format read back
through its reader, resuming after an interruption, and the errors a user meets."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

import raypipe as rp
from raypipe.cli import main
from raypipe.convert.plan import list_source
from raypipe.convert.run import STATE, convert
from raypipe.errors import ReaderError, UsageError
from raypipe.formats.registry import FORMATS, get, read_converted


@rp.pipeline_def(batch_size=5, num_threads=2, device_id=None, seed=0)
def converted(dst):
    return read_converted(dst, name="Reader")


def _read_all(dst, n):
    pipe = converted(dst=dst)
    pipe.build()
    assert pipe.epoch_size("Reader") == n
    images, labels = [], []
    while len(images) < n:
        data, label = pipe.run()
        for i in range(len(data)):
            images.append(np.asarray(data.at(i)).tobytes())
            labels.append(np.asarray(label.at(i)))
    pipe.close()
    return images[:n], labels[:n]


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_format_reads_back_identical_bytes_and_labels(tmp_path, jpeg_root, jpeg_files, fmt):
    summary = convert(list_source(jpeg_root), str(tmp_path / fmt), get(fmt), part_size=7, workers=2)
    assert (summary.samples, summary.classes, summary.parts_skipped) == (24, 4, 0)
    assert summary.parts == (4 if FORMATS[fmt].sharded else 4)
    images, labels = _read_all(str(tmp_path / fmt), 24)
    for path, image, label in zip(jpeg_files, images, labels):
        with open(path, "rb") as f:
            assert image == f.read()
        assert label.dtype == np.int32 and label.shape == (1,)
        assert int(label[0]) == int(os.path.basename(os.path.dirname(path)).split("_")[1])
    with open(tmp_path / fmt / "classes.txt") as f:
        assert f.read().splitlines() == [f"{i} class_{i:03d}" for i in range(4)]


@pytest.mark.parametrize("fmt", ["tfrecord", "caffe"])
def test_rerun_after_an_interruption_redoes_only_unfinished_parts(tmp_path, jpeg_root, fmt):
    dst = str(tmp_path / "out")
    source = list_source(jpeg_root)
    convert(source, dst, get(fmt), part_size=10, workers=1)
    before, _ = _read_all(dst, 24)
    # a crash in the middle of the last part: its marker never got written
    os.remove(
        os.path.join(dst, STATE, sorted(f for f in os.listdir(os.path.join(dst, STATE)) if f.endswith(".done"))[-1])
    )
    if FORMATS[fmt].sharded:
        last = sorted(f for f in os.listdir(dst) if f.startswith("shard-"))[-1]
        os.truncate(os.path.join(dst, last), 100)
    summary = convert(source, dst, get(fmt), part_size=10, workers=1)
    assert (summary.parts, summary.parts_skipped, summary.samples) == (3, 2, 24)
    assert 0 < summary.bytes_written < summary.bytes  # the last part alone
    after, _ = _read_all(dst, 24)
    assert after == before
    again = convert(source, dst, get(fmt), part_size=10, workers=1)
    assert (again.parts_skipped, again.bytes_written, again.bytes) == (3, 0, summary.bytes)


def test_another_source_into_the_same_destination_is_refused(tmp_path, jpeg_root, jpeg_files):
    dst = str(tmp_path / "out")
    convert(list_source(jpeg_root), dst, get("recordio"), part_size=10, workers=1)
    with pytest.raises(UsageError, match="part_size"):
        convert(list_source(jpeg_root), dst, get("recordio"), part_size=5, workers=1)
    with pytest.raises(UsageError, match="format"):
        convert(list_source(jpeg_root), dst, get("tfrecord"), part_size=10, workers=1)


def test_a_file_list_source_keeps_its_labels(tmp_path, jpeg_files):
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{os.path.relpath(p, tmp_path)} {100 + i}\n" for i, p in enumerate(jpeg_files[:9])))
    summary = convert(list_source(str(listing)), str(tmp_path / "out"), get("webdataset"), part_size=4, workers=1)
    assert (summary.samples, summary.classes) == (9, 9)
    images, labels = _read_all(str(tmp_path / "out"), 9)
    assert [int(lb[0]) for lb in labels] == list(range(100, 109))
    assert images[3] == open(jpeg_files[3], "rb").read()


def test_a_missing_source_file_is_named(tmp_path, jpeg_files):
    listing = tmp_path / "list.txt"
    listing.write_text(f"{jpeg_files[0]} 0\n{tmp_path / 'gone.jpg'} 1\n")
    with pytest.raises(ReaderError, match="gone.jpg"):
        convert(list_source(str(listing)), str(tmp_path / "out"), get("tfrecord"), part_size=4, workers=1)


def test_cli_convert_prints_a_summary_and_index_rewrites_the_same_index(tmp_path, jpeg_root, capsys):
    dst = str(tmp_path / "tf")
    assert (
        main(
            [
                "convert",
                jpeg_root,
                dst,
                "--format",
                "tfrecord",
                "--shard-size",
                "10",
                "--quiet",
                "--json",
                str(tmp_path / "s.json"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "24 samples" in out and "4 classes" in out and "3 shards, 0 already done" in out and "MB/s written" in out
    printed = "\n".join(line.strip() for line in out.splitlines() if line.startswith("    "))
    assert printed == f"from raypipe.formats.registry import read_converted\njpegs, labels = read_converted({dst!r})"
    assert f"presets.resnet50_train({dst!r})" in out
    assert "class after class" in out and "--shuffle" in out, "a folder written as listed says how it will mix"

    @rp.pipeline_def(batch_size=24, num_threads=1, device_id=None)
    def as_printed():
        scope: dict = {}
        exec(printed, scope)  # the lines the summary prints, pasted into a pipeline definition
        return scope["jpegs"], scope["labels"]

    with as_printed() as pipe:
        assert sorted(int(np.asarray(v)[0]) for v in pipe.run()[1]) == [c for c in range(4) for _ in range(6)]
    assert json.loads((tmp_path / "s.json").read_text())["samples"] == 24
    assert main(["convert", jpeg_root, dst, "--format", "tfrecord", "--shard-size", "10", "--quiet"]) == 0
    rerun = capsys.readouterr().out
    assert "3 shards, 3 already done;" in rerun and " s, nothing left to write)" in rerun
    shard = sorted(f for f in os.listdir(dst) if f.endswith(".tfrecord"))[1]
    written = open(os.path.join(dst, shard + ".idx")).read()
    assert main(["index", "tfrecord", os.path.join(dst, shard), "--out", str(tmp_path / "again.idx")]) == 0
    assert (tmp_path / "again.idx").read_text() == written
    assert "10 records" in capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["tfrecord", "caffe"])
def test_shuffle_writes_the_samples_in_one_seeded_order(tmp_path, jpeg_root, jpeg_files, fmt, capsys):
    def written(name: str, *seed: str) -> list[tuple[bytes, int]]:
        dst = str(tmp_path / name)
        argv = ["convert", jpeg_root, dst, "--format", fmt, "--shard-size", "10", "--quiet", "--shuffle", *seed]
        assert main(argv) == 0
        images, labels = _read_all(dst, 24)
        return [(image, int(label[0])) for image, label in zip(images, labels)]

    listed = [(open(p, "rb").read(), i // 6) for i, p in enumerate(jpeg_files)]
    first = written("a")
    assert "class after class" not in capsys.readouterr().out
    assert first != listed and sorted(first) == sorted(listed), "the same samples, mixed"
    assert written("b") == first, "the default seed"
    assert written("c", "--shuffle-seed", "7") not in (first, listed)
    with pytest.raises(UsageError, match="another source"):
        convert(list_source(jpeg_root, shuffle_seed=7), str(tmp_path / "a"), get(fmt), part_size=10, workers=1)


def test_cli_rejects_bad_options_before_any_work(tmp_path, jpeg_root, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["convert", jpeg_root, str(tmp_path / "x"), "--format", "tfrecord", "--shard-size", "0"])
    assert exc.value.code == 2 and "--shard-size must be positive" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["convert", jpeg_root, str(tmp_path / "x"), "--format", "tfrecord", "--shuffle", "--shuffle-seed", "-1"])
    assert "--shuffle-seed must be a non-negative int" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "x")
    with pytest.raises(SystemExit):
        main(["index", "tfrecord", "a", "b", "--out", "c"])
    assert "single FILE" in capsys.readouterr().err


def test_index_of_a_corrupt_file_names_it(tmp_path, jpeg_root, capsys):
    dst = str(tmp_path / "rec")
    convert(list_source(jpeg_root), dst, get("recordio"), part_size=30, workers=1)
    data = os.path.join(dst, "shard-00000-of-00001.rec")
    broken = str(tmp_path / "broken.rec")
    shutil.copy(data, broken)
    fifth = int(open(os.path.join(dst, "shard-00000-of-00001.idx")).read().splitlines()[5].split()[1])
    with open(broken, "r+b") as f:
        f.seek(fifth)
        f.write(b"\xff" * 4)  # record 5's magic number
    assert main(["index", "mxnet", broken, "--quiet"]) == 1
    assert "broken.rec record 5" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "broken.idx")
