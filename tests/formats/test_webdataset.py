"""WebDataset tar shards: scanning real tars, DALI's index format, and the writer."""

from __future__ import annotations

import io
import os
import tarfile

import numpy as np
import pytest

from raypipe.errors import ArgumentError, ReaderError
from raypipe.formats import webdataset as wds

PNG = b"\x89PNG\r\n\x1a\n" + b"png-body"


def make_tar(path, members, fmt=tarfile.PAX_FORMAT) -> str:
    """A tar of ``(name, bytes)`` members; a name ending in '/' is a directory, ``(name, '->x')``
    a symbolic link."""
    with tarfile.open(path, "w", format=fmt) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name.rstrip("/"))
            if name.endswith("/"):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif isinstance(data, str):
                info.type, info.linkname = tarfile.SYMTYPE, data[2:]
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return str(path)


def sample_tar(path) -> str:
    return make_tar(
        path,
        [
            ("a.jpg", b"J" * 700),
            ("a.cls", b"3"),
            ("dir/", None),
            ("dir/b.seg.png", PNG),
            ("dir/b.cls", b"12"),
            ("dir/.hidden", b"h"),
            ("link.jpg", "->a.jpg"),
            ("c.cls", b"7"),
            ("a.jpg", b"again"),
        ],
    )


def test_scan_groups_consecutive_members_and_skips_what_webdataset_skips(tmp_path):
    path = sample_tar(tmp_path / "s.tar")
    samples = wds.scan(path)
    assert [s.key for s in samples] == ["a", "dir/b", "c", "a"]
    assert [[c.ext for c in s.components] for s in samples] == [["jpg", "cls"], ["seg.png", "cls"], ["cls"], ["jpg"]]
    with open(path, "rb") as f:
        data = f.read()
    expected = {"a.jpg": b"J" * 700, "a.cls": b"3", "dir/b.seg.png": PNG, "dir/b.cls": b"12", "c.cls": b"7"}
    for c in samples[0].components + samples[1].components + samples[2].components:
        assert c.offset % 512 == 0
        assert data[c.offset : c.offset + c.size] == expected[c.name]
    assert samples[3].components[0].size == 5


def test_index_lines_are_dalis_format(tmp_path):
    path = sample_tar(tmp_path / "s.tar")
    assert wds.write_index(path, str(tmp_path / "s.idx")) == 4
    lines = open(tmp_path / "s.idx").read().splitlines()
    samples = wds.scan(path)
    assert lines[0] == "v1.2 4"
    for line, sample in zip(lines[1:], samples):
        assert line == " ".join(f"{c.ext} {c.offset} {c.size} {c.name}" for c in sample.components)
    assert lines[1] == f"jpg 512 700 a.jpg cls {samples[0].components[1].offset} 1 a.cls"
    index = wds.read_index(str(tmp_path / "s.idx"), path)
    assert index.keys.tolist() == ["a", "dir/b", "c", "a"]
    assert index.starts.tolist() == [0, 2, 4, 5, 6]
    assert index.exts.tolist() == ["jpg", "cls", "seg.png", "cls", "cls", "jpg"]


def test_index_equals_dalis_wds2idx(tmp_path):
    wds2idx = pytest.importorskip("wds2idx")
    path = make_tar(
        tmp_path / "s.tar",
        [("x/k1.jpg", b"1" * 1000), ("x/k1.txt", b"t"), ("k2.jpg", b"2"), ("k" * 120 + ".jpg", b"long")],
    )
    with wds2idx.IndexCreator(path, str(tmp_path / "dali.idx"), verbose=False) as creator:
        creator.create_index()
    wds.write_index(path, str(tmp_path / "ours.idx"))
    assert open(tmp_path / "ours.idx").read() == open(tmp_path / "dali.idx").read()


def test_dali_reads_our_index(tmp_path):
    pytest.importorskip("nvidia.dali")
    from nvidia.dali import fn, pipeline_def

    path = sample_tar(tmp_path / "s.tar")
    wds.write_index(path, str(tmp_path / "s.idx"))

    @pipeline_def(batch_size=4, num_threads=1, device_id=None)
    def pipe():
        images, labels = fn.readers.webdataset(
            paths=[path], index_paths=[str(tmp_path / "s.idx")], ext=["jpg;seg.png", "cls"]
        )
        return images, labels

    p = pipe()
    p.build()
    images, labels = p.run()
    assert [np.asarray(images[i]).tobytes() for i in range(4)] == [b"J" * 700, PNG, b"", b"again"]
    assert [np.asarray(labels[i]).tobytes() for i in range(4)] == [b"3", b"12", b"7", b""]


def test_truncated_member_names_the_tar_and_member(tmp_path):
    path = make_tar(tmp_path / "t.tar", [("a.jpg", b"x" * 2000), ("a.cls", b"1"), ("b.jpg", b"y" * 3000)])
    size = wds.scan(path)[1].components[0].offset + 1000
    with open(path, "r+b") as f:
        f.truncate(size)
    with pytest.raises(ReaderError, match=r"t\.tar: member 'b\.jpg' .* runs past the end of the file"):
        wds.scan(path)
    with pytest.raises(ReaderError, match="member 'b.jpg'"):
        wds.write_index(path, str(tmp_path / "t.idx"))
    assert not os.path.exists(tmp_path / "t.idx")


def test_cut_or_corrupt_header_is_an_error_not_an_early_end(tmp_path):
    path = make_tar(tmp_path / "t.tar", [("a.jpg", b"x" * 600), ("b.jpg", b"y")])
    header = wds.scan(path)[1].components[0].offset - 512
    with open(path, "r+b") as f:
        f.truncate(header + 100)
    with pytest.raises(ReaderError, match=rf"t\.tar: unreadable tar header at byte {header}"):
        wds.scan(path)
    path = make_tar(tmp_path / "c.tar", [("a.jpg", b"x" * 600), ("b.jpg", b"y")])
    with open(path, "r+b") as f:
        f.seek(header + 148)  # the checksum field
        f.write(b"0000000\0")
    with pytest.raises(ReaderError, match=f"unreadable tar header at byte {header}"):
        wds.scan(path)


def test_not_a_plain_tar(tmp_path):
    import gzip

    path = make_tar(tmp_path / "s.tar", [("a.jpg", b"x")])
    (tmp_path / "s.tar.gz").write_bytes(gzip.compress(open(path, "rb").read()))
    with pytest.raises(ReaderError, match=r"s\.tar\.gz: cannot open as an uncompressed tar"):
        wds.scan(str(tmp_path / "s.tar.gz"))
    empty = make_tar(tmp_path / "e.tar", [("dir/", None)])
    with pytest.raises(ReaderError, match=r"e\.tar: the tar holds no WebDataset sample"):
        wds.write_index(empty, str(tmp_path / "e.idx"))
    spaced = make_tar(tmp_path / "w.tar", [("a b.jpg", b"x")])
    with pytest.raises(ReaderError, match="member 'a b.jpg' has whitespace"):
        wds.write_index(spaced, str(tmp_path / "w.idx"))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda lines: ["v1.2 3"] + lines[1:], r"line 1: the header says 3 samples but 2 lines follow"),
        (lambda lines: ["v2.0 2"] + lines[1:], r"line 1: expected 'v1.2 N'"),
        (lambda lines: [lines[0], lines[1], ""], r"line 1: the header says 2 samples but 1 lines follow"),
        (lambda lines: [lines[0], lines[1], "jpg 2560 5"], r"line 3: expected groups of 'ext offset size name'"),
        (lambda lines: [lines[0], lines[1], lines[2].replace(" 1 ", " x ")], r"line 3: size 'x' is not"),
        (lambda lines: [lines[0], lines[1].replace("512", "520", 1), lines[2]], r"line 2: .* not on a 512-byte"),
        (lambda lines: [lines[0], "", lines[2]], r"line 2: expected groups of 'ext offset size name', got ''"),
        (lambda lines: [lines[0], lines[1].replace("512", "1024", 1), lines[2]], r"line 2: .* no tar header before"),
        (lambda lines: [lines[0], lines[1], lines[2].replace(" 1 ", " 2 ")], r"line 3: .* its tar header says 1 bytes"),
        (lambda lines: [lines[0], lines[1], lines[2].replace(" 1 ", " 99999 ")], r"line 3: .* runs past the end"),
        (lambda lines: [lines[0], lines[1], "jpg 512000 1 b.jpg"], r"line 3: .* runs past the end"),
    ],
)
def test_index_that_does_not_match_the_tar_names_the_index_and_line(tmp_path, edit, message):
    path = make_tar(tmp_path / "s.tar", [("a.jpg", b"x" * 1000), ("b.cls", b"1")])
    index = str(tmp_path / "s.idx")
    wds.write_index(path, index)
    lines = open(index).read().splitlines()
    with open(index, "w") as f:
        f.write("\n".join(edit(lines)) + "\n")
    with pytest.raises(ReaderError, match=rf"s\.idx {message}"):
        wds.read_index(index, path)


def test_v1_1_index_without_names_is_read(tmp_path):
    path = make_tar(tmp_path / "s.tar", [("a.jpg", b"x" * 1000), ("a.cls", b"1")])
    (tmp_path / "s.idx").write_text("v1.1 1\njpg 512 1000 cls 2048 1\n")
    index = wds.read_index(str(tmp_path / "s.idx"), path)
    assert index.names is None and index.keys is None
    assert index.offsets.tolist() == [512, 2048] and index.sizes.tolist() == [1000, 1]


def test_writer_writes_image_and_label_members_and_the_index(tmp_path, jpeg_files):
    path = str(tmp_path / "w.tar")
    with wds.WebDatasetWriter(path) as writer:
        writer.add("class_000/img_00001", open(jpeg_files[0], "rb").read(), 0)
        writer.add("class.001/img 2", PNG, 12)
    result = writer.close()
    assert result == {"samples": 2, "bytes": os.path.getsize(path), "index": path + ".idx"}
    with tarfile.open(path) as tar:
        assert tar.getnames() == [
            "class_000_img_00001.jpg",
            "class_000_img_00001.cls",
            "class_001_img_2.png",
            "class_001_img_2.cls",
        ]
        assert tar.extractfile("class_001_img_2.cls").read() == b"12"
        assert tar.extractfile("class_000_img_00001.jpg").read() == open(jpeg_files[0], "rb").read()
    index = wds.read_index(result["index"], path)
    assert index.keys.tolist() == ["class_000_img_00001", "class_001_img_2"]


def test_writer_refuses_unknown_images_and_merging_keys(tmp_path):
    with wds.WebDatasetWriter(str(tmp_path / "w.tar")) as writer:
        with pytest.raises(ArgumentError, match="'k': not a JPEG, PNG"):
            writer.add("k", b"plain text", 0)
        writer.add("a/b", PNG, 0)
        with pytest.raises(ArgumentError, match="key 'a.b' becomes 'a_b' in the tar, which would merge"):
            writer.add("a.b", PNG, 1)
    assert writer.close()["samples"] == 1
    empty = wds.WebDatasetWriter(str(tmp_path / "e.tar"))
    assert empty.close()["index"] is None
