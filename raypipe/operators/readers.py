"""``readers.file``: encoded files and integer labels from a folder tree, a list file,
or explicit lists, with DALI's sharding and shuffling arguments and random access
by sample index (the distributed service drives it with explicit indices).

Every path may be an object-store URL (:mod:`raypipe.storage`): a URL ``file_root`` is listed
once (a service hands its listing to its actors), URL files are fetched ahead of the reads the
executor announces, many in flight; local files keep their one ``preadv`` each."""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any

import numpy as np

from ..errors import ArgumentError, ReaderError
from ..operator import Schema, register
from ..storage import listings, store, urls
from ..storage.failures import StorageError
from ..storage.folders import list_url_root
from ..storage.prefetch import Prefetcher
from .path_table import PathTable
from .reader_base import ShardedReader, as_hashed, paths_hash, paths_hash_under, refuse_unexpanded_home

#: DALI's default ``file_filters``: the files ``file_root`` lists in each class folder.
DEFAULT_FILE_FILTERS = (
    "*.jpg",
    "*.jpeg",
    "*.png",
    "*.bmp",
    "*.tif",
    "*.tiff",
    "*.pnm",
    "*.ppm",
    "*.pgm",
    "*.pbm",
    "*.jp2",
    "*.webp",
    "*.flac",
    "*.ogg",
    "*.wav",
)


def read_file(path: str) -> np.ndarray:
    """The bytes of the file at ``path`` as a new uint8 array: one ``preadv`` into the array (about
    3x faster than ``np.fromfile`` for files of a few hundred KB; the GIL is released). The size
    comes from ``lseek`` (a third of ``fstat``'s cost from Python, which builds a stat result)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        data = np.empty(size, np.uint8)
        got = os.preadv(fd, [data], 0) if size else 0
        while got < size:  # a short read (network filesystems)
            more = os.preadv(fd, [data[got:]], got)
            if more == 0:
                raise OSError(f"the file ended after {got} of {size} bytes")
            got += more
        return data
    finally:
        os.close(fd)


def _matcher(patterns: Sequence[str], case_sensitive: bool) -> Callable[[str], object]:
    """One compiled test for "the name matches one of the globs" (a listing runs it per file)."""
    regex = "|".join(f"(?:{fnmatch.translate(p)})" for p in patterns)
    return re.compile(regex, 0 if case_sensitive else re.IGNORECASE).match


def list_file_root(
    file_root: str,
    file_filters: Sequence[str] = DEFAULT_FILE_FILTERS,
    dir_filters: Sequence[str] | None = None,
    case_sensitive_filter: bool = False,
) -> tuple[Sequence[str], Sequence[int]]:
    """The files directly inside each class folder of ``file_root`` that match a glob of
    ``file_filters``; labels are the indices of the class folders (those matching
    ``dir_filters``, all when None) in sorted order. As DALI: sub-folders of a class folder and
    files beside the class folders are not read, and matching ignores case unless
    ``case_sensitive_filter``. A URL ``file_root`` is listed in the object store (the same rules).
    A local folder's paths come as a :class:`PathTable` and its labels as an int32 array."""
    if urls.is_url(file_root):
        return list_bucket_root(file_root, file_filters, dir_filters, case_sensitive_filter)[:2]
    paths, labels, _ = list_local_root(file_root, file_filters, dir_filters, case_sensitive_filter)
    return paths, labels


def list_local_root(
    file_root: str,
    file_filters: Sequence[str] = DEFAULT_FILE_FILTERS,
    dir_filters: Sequence[str] | None = None,
    case_sensitive_filter: bool = False,
) -> tuple[PathTable, np.ndarray, Any]:
    """:func:`list_file_root` of a local folder, with :func:`paths_hash` of the paths made as they
    are listed: ``(paths, labels, hash)``. A listing's names need no relating (the common folder
    is ``file_root``, or the one class folder that holds files), so hashing them a folder at a
    time costs a few calls in C, where relating a million paths costs seconds. The paths are
    kept a folder at a time too (:class:`PathTable`), not as a million strings."""
    if not os.path.isdir(file_root):
        raise ReaderError(f"readers.file: file_root {file_root!r} does not exist or is not a folder")
    wanted_dir = _matcher(dir_filters, case_sensitive_filter) if dir_filters is not None else None
    wanted_file = _matcher(file_filters, case_sensitive_filter)
    classes = sorted(e.name for e in os.scandir(file_root) if e.is_dir() and (wanted_dir is None or wanted_dir(e.name)))
    counts = np.zeros(len(classes), np.int64)
    under_root = hashlib.sha256()
    first: list[list[str]] = []  # the first class folder's names: the hash where no other holds files

    def class_folders() -> Iterator[tuple[str, list[str]]]:  # a folder's names are dropped once stored
        for label, cls in enumerate(classes):
            folder = os.path.join(file_root, cls, "")
            with os.scandir(folder) as entries:
                names = sorted(filter(wanted_file, [e.name for e in entries if not e.is_dir()]))
            if names:
                under_root.update(as_hashed(cls + "/" + ("\0" + cls + "/").join(names) + "\0"))
                counts[label] = len(names)
                first[:] = first or [names]
                yield folder, names

    paths = PathTable(class_folders())
    labels = np.repeat(np.arange(len(classes), dtype=np.int32), counts)
    _checked_listing(file_root, paths, file_filters, dir_filters, len(classes))
    if len(first[0]) == len(paths):  # one class folder holds files: the paths' common folder is that one
        return paths, labels, hashlib.sha256(as_hashed("\0".join(first[0]) + "\0"))
    return paths, labels, under_root


def list_bucket_root(
    file_root: str,
    file_filters: Sequence[str] = DEFAULT_FILE_FILTERS,
    dir_filters: Sequence[str] | None = None,
    case_sensitive_filter: bool = False,
) -> tuple[Sequence[str], list[int], list[int]]:
    """:func:`list_file_root` of a URL, with the size of every object: ``(urls, labels, sizes)``,
    the URLs as a :class:`PathTable` (a service publishes the listing for its actors)."""
    wanted_dir = _matcher(dir_filters, case_sensitive_filter) if dir_filters is not None else None
    paths, labels, sizes, classes = list_url_root(file_root, wanted_dir, _matcher(file_filters, case_sensitive_filter))
    _checked_listing(file_root, paths, file_filters, dir_filters, classes)
    return PathTable.compacted(paths), labels, sizes


def _checked_listing(
    file_root: str,
    paths: Sequence[str],
    file_filters: Sequence[str],
    dir_filters: Sequence[str] | None,
    classes: int,
) -> None:
    """ReaderError when no file matched."""
    if not paths:
        filters = ", ".join(list(file_filters)[:4]) + (", ..." if len(file_filters) > 4 else "")
        where = f"{classes} class folder(s)"
        if dir_filters:
            where += f" matching dir_filters {', '.join(dir_filters)}"
        raise ReaderError(
            f"readers.file: file_root {file_root!r} holds no files matching file_filters {filters} in {where} "
            "(expected one sub-folder per class)"
        )


def _as_patterns(name: str, value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    patterns = (value,) if isinstance(value, str) else tuple(value)
    if not patterns or not all(isinstance(p, str) and p for p in patterns):
        raise ArgumentError(f"readers.file: {name} must be a glob string or a non-empty list of them, got {value!r}")
    return patterns


def parse_file_list(file_list: str, root: str | None = None) -> tuple[Sequence[str], np.ndarray]:
    """Lines of ``path label``; relative paths are relative to ``root`` where given (DALI's
    ``file_root`` beside a ``file_list``), else to the list file's folder (a URL list's paths to its
    URL folder); the list, the root and a path may be URLs."""
    paths, labels, _ = read_file_list(file_list, root, hashed=False)
    return paths, labels


def read_file_list(
    file_list: str, root: str | None = None, hashed: bool = True
) -> tuple[Sequence[str], np.ndarray, Any]:
    """:func:`parse_file_list`, with :func:`paths_hash` of the paths where ``hashed`` and the list's
    names give it at once (:func:`paths_hash_under`), else None: ``(paths, labels, hash)``, the
    labels as int32."""
    try:
        if urls.is_url(file_list):
            text = store.read(file_list).tobytes().decode("utf-8")
        else:
            with open(file_list, encoding="utf-8") as f:
                text = f.read()
    except StorageError as exc:
        raise type(exc)(f"readers.file: cannot open file_list {exc}") from None
    except OSError as exc:
        raise ReaderError(f"readers.file: cannot open file_list {file_list!r}: {exc.strerror}") from None
    base = root if root is not None else urls.parent(file_list)
    parsed = _parsed_at_once(text, base, hashed)
    if parsed is None:
        paths, labels = _parsed_line_by_line(text.splitlines(), base, file_list)
        parsed = paths, np.array(labels, np.int32), None
    if not parsed[0]:
        raise ReaderError(f"readers.file: file_list {file_list!r} lists no files")
    return parsed


#: a blank other than a space or a line end (str.isspace's, which ``split()`` parts words at)
_OTHER_BLANK = re.compile(r"[^\S \n]")


def _single_spaced(text: str) -> bool:
    """True when every blank of ``text`` is a line end or one space between two words."""
    if text.startswith(" ") or text.endswith(" ") or any(b in text for b in ("  ", " \n", "\n ")):
        return False
    if text.isascii():  # a few scans for the ASCII blanks, not a regular expression's
        return not any(b in text for b in "\t\r\x0b\x0c\x1c\x1d\x1e\x1f")
    return _OTHER_BLANK.search(text) is None


class _NotAtOnce(Exception):
    """A line of the list that the at-once reading cannot take: the list is read line by line."""


#: characters of a list's text parsed in one go: bounds the strings alive at once (a line's
#: string and its parts take about 400 bytes, the path kept in a table about 40)
_CHUNK_CHARS = 1 << 20


def _parsed_at_once(text: str, base: str, hashed: bool = True) -> tuple[PathTable, np.ndarray, Any] | None:
    """:func:`_parsed_line_by_line`'s result, in calls that each take a chunk's lines in C (an
    ImageNet list in 1.6 s, not 3.7 s): where words are parted by one space, a line's path is what
    precedes its last space; with the paths' hash where :func:`paths_hash_under` gives it. None for
    lists this cannot read that way (other blanks, a line it cannot read, to be named by the
    line-by-line route, URL paths, absolute paths beside relative ones or under a URL ``base``).
    The paths are kept as one :class:`PathTable`, a chunk of about a megabyte of text at a time."""
    if not _single_spaced(text) or "://" in text:
        return None
    absolute = text.startswith("/") or "\n/" in text
    if absolute and urls.is_url(base):
        return None  # absolute paths inside a bucket
    if absolute:
        prefix = ""
    else:
        prefix = base.rstrip("/") + "/" if urls.is_url(base) else os.path.join(base, "")
    labels: list[np.ndarray] = []

    def chunks() -> Iterator[tuple[str, list[str]]]:
        for lines in _line_chunks(text):
            parts = list(map(str.rpartition, lines, repeat(" ")))
            names = list(map(itemgetter(0), parts))
            if "" in names or (absolute and not all(map(str.startswith, names, repeat("/")))):
                raise _NotAtOnce  # a line without a path, or relative paths beside absolute ones
            words = list(map(itemgetter(2), parts))
            joined = "".join(words)
            if not (joined.isascii() and joined.isdigit()):
                raise _NotAtOnce  # a label not in digits 0-9 (a sign, "_", another script): named line by line
            try:
                labels.append(np.array(list(map(int, words)), np.int32))
            except OverflowError:
                raise _NotAtOnce from None
            yield prefix, names

    try:
        paths = PathTable(chunks())
    except _NotAtOnce:
        return None
    hashed_now = paths_hash_under(base, paths) if hashed and not absolute else None
    return paths, np.concatenate(labels) if labels else np.zeros(0, np.int32), hashed_now


def _line_chunks(text: str) -> Iterator[list[str]]:
    """The non-empty lines of ``text``, about :data:`_CHUNK_CHARS` characters of them at a time."""
    start = 0
    while start < len(text):
        end = text.find("\n", start + _CHUNK_CHARS)
        end = len(text) if end < 0 else end
        yield list(filter(None, text[start:end].split("\n")))
        start = end + 1


def _parsed_line_by_line(lines: list[str], base: str, file_list: str) -> tuple[list[str], list[int]]:
    """Each line's ``(path, label)``, the path joined to ``base``; ReaderError naming the first line
    that is not ``path label``."""
    paths, labels = [], []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.strip().rsplit(maxsplit=1)
        if len(parts) != 2:
            raise ReaderError(f"readers.file: {file_list}:{lineno}: expected 'path label', got {line!r}")
        path, label = parts
        if not (label.isascii() and label.isdigit()):  # as DALI: no sign, no "_", digits 0-9 only
            raise ReaderError(
                f"readers.file: {file_list}:{lineno}: label {label!r} is not an integer written in digits 0-9 "
                f"(no sign, as DALI reads a label) in {line!r}"
            )
        value = int(label)
        if value >= 2**31:
            raise ReaderError(f"readers.file: {file_list}:{lineno}: label {label!r} does not fit in int32")
        paths.append(urls.join(base, path))
        labels.append(value)
    return paths, labels


def _url_mask(paths: Sequence[str]) -> np.ndarray | None:
    """Which of ``paths`` are object-store URLs; None when none is (one scan in C of a million
    local paths, where asking each path takes 0.3-0.6 s; a table's paths a folder at a time)."""
    if isinstance(paths, PathTable) and not paths.contains("://"):
        return None
    if isinstance(paths, PathTable) and paths.by_folder():
        firsts, counts = zip(*_group_firsts(paths))
        remote = np.repeat(np.fromiter(map(urls.is_url, firsts), bool, len(firsts)), counts)
    elif not any(map(str.__contains__, paths, repeat("://"))):
        return None
    else:
        remote = np.fromiter((urls.is_url(p) for p in paths), bool, len(paths))
    return remote if remote.any() else None


def _group_firsts(table: PathTable) -> Iterator[tuple[str, int]]:
    """The first path of each of ``table``'s folders and the number of paths there: the paths of a
    folder are all URLs in one bucket, or all local."""
    for prefix, names in table.groups():
        yield prefix + names[: names.index("\0")], names.count("\0")


def _bucket_firsts(paths: Sequence[str]) -> list[str]:
    """The first URL of ``paths`` in each bucket they name, to check each bucket once."""
    if isinstance(paths, PathTable) and paths.by_folder():
        candidates: Iterable[str] = (first for first, _ in _group_firsts(paths))
    else:
        candidates = paths
    firsts: dict[str, str] = {}
    for path in candidates:
        if urls.is_url(path):
            firsts.setdefault(urls.parse(path).bucket, path)
    return list(firsts.values())


@register
class FileReader(ShardedReader):
    """Reads whole files as uint8 arrays, with an int32 label per file."""

    schema = Schema("readers.file", devices=("cpu",), min_inputs=0, max_inputs=0, num_outputs=2, is_reader=True)
    SHUFFLES_LISTING = True

    def configure(
        self,
        file_root: str | None = None,
        file_list: str | None = None,
        files: Sequence[str] | None = None,
        labels: Sequence[int] | None = None,
        file_filters: str | Sequence[str] = DEFAULT_FILE_FILTERS,
        dir_filters: str | Sequence[str] | None = None,
        case_sensitive_filter: bool = False,
        **reader_args: Any,
    ) -> None:
        given = [n for n, v in (("file_root", file_root), ("file_list", file_list), ("files", files)) if v is not None]
        if given == ["file_root", "file_list"]:  # as DALI: the list's paths are relative to file_root
            given = ["file_list"]
        if len(given) != 1:
            raise ArgumentError(
                f"readers.file: give exactly one of file_root, file_list, files (got {given or 'none'})"
            )
        if labels is not None and files is None:
            raise ArgumentError("readers.file: labels can only be given with files")
        if files is not None:
            files = [os.fspath(f) for f in files]
            if not files:
                raise ArgumentError("readers.file: files is empty")
            if labels is not None and len(labels) != len(files):
                raise ArgumentError(f"readers.file: {len(files)} files but {len(labels)} labels")
        for name, value in (("file_root", file_root), ("file_list", file_list)):
            if value is not None:
                refuse_unexpanded_home("readers.file", name, [os.fspath(value)])
        if files is not None:
            refuse_unexpanded_home("readers.file", "files", files)
            if any(map(str.__contains__, files, repeat("\0"))):
                raise ArgumentError(
                    f"readers.file: files holds a path with a NUL character: {next(p for p in files if chr(0) in p)!r}"
                )
            files = PathTable.compacted(files)  # a folder's prefix once, its names in one string
        self.configure_reader(**reader_args)
        self.file_filters = _as_patterns("file_filters", file_filters)
        self.dir_filters = _as_patterns("dir_filters", dir_filters)
        self.case_sensitive_filter = bool(case_sensitive_filter)
        self.file_root, self.file_list = file_root, file_list
        self._files, self._labels = files, labels
        self.paths: Sequence[str] | None = None
        self._prefetch: Prefetcher | None = None  # object-store files only
        self._remote: np.ndarray | None = None  # which paths are URLs, when not all of them are
        self._sizes: list[int] | None = None
        self._listing: tuple | None = None
        self._paths_hash: Any = None  # paths_hash(self.paths), where the listing or list made it

    def prepare(self) -> None:
        """List the data; raises ReaderError naming the folder, list file or line at fault. A URL
        ``file_root`` or ``file_list`` is listed once per service (:mod:`raypipe.storage.listings`);
        the buckets of URL files are checked (missing, or credentials refused) before any batch."""
        if self.paths is not None:
            return
        key, sizes = self._listing_key(), None
        if key is not None:
            paths, labels, sizes = listings.listed(key, self._list)
        elif self.file_list is not None:
            root = None if self.file_root is None else os.fspath(self.file_root)
            paths, labels, self._paths_hash = read_file_list(os.fspath(self.file_list), root)
        elif self.file_root is not None:
            paths, labels, self._paths_hash = list_local_root(
                os.fspath(self.file_root), self.file_filters, self.dir_filters, self.case_sensitive_filter
            )
        else:
            paths = self._files
            labels = list(self._labels) if self._labels is not None else list(range(len(paths)))
        if len(paths) < self.num_shards:
            raise ReaderError(f"readers.file: {len(paths)} files cannot fill {self.num_shards} shards")
        remote = _url_mask(paths)
        if remote is not None:
            for first in _bucket_firsts(paths):
                try:
                    store.check(first)
                except StorageError as exc:
                    raise type(exc)(f"readers.file: {exc}") from None
            self._remote = None if remote.all() else remote
            self._sizes = sizes
            self._prefetch = Prefetcher(self._fetch)
        self._listing = (key, (paths, labels, sizes)) if key is not None else None
        self.paths = paths
        self.labels = np.asarray(labels, dtype=np.int32)

    def _listing_key(self) -> tuple | None:
        """What a URL ``file_root`` or ``file_list`` listing is kept under; None for other sources."""
        if self.file_list is not None:
            return ("readers.file", self.file_list, self.file_root) if urls.is_url(self.file_list) else None
        if self.file_root is not None and urls.is_url(self.file_root):
            return ("readers.file", self.file_root, self.file_filters, self.dir_filters, self.case_sensitive_filter)
        return None

    def _list(self) -> tuple[Sequence[str], Sequence[int], list[int] | None]:
        if self.file_list is not None:
            return (*parse_file_list(self.file_list, self.file_root), None)
        return list_bucket_root(self.file_root, self.file_filters, self.dir_filters, self.case_sensitive_filter)

    def shared_listing(self) -> tuple[tuple, tuple] | None:
        """``(key, listing)`` when this reader listed an object-store folder or list: a service
        hands it to its actors instead of having each list again."""
        self.prepare()
        return self._listing

    def __len__(self) -> int:
        self.prepare()
        return len(self.paths)

    def source_of(self, index: int) -> str:
        """The file behind sample ``index``."""
        return self.paths[index] if self.paths is not None and 0 <= index < len(self.paths) else f"sample {index}"

    def source_info(self, index: int) -> str:
        """The file's path as listed, as DALI gives it: relative to ``file_root`` (or to the folder a
        ``file_list``'s relative lines are read from), else as given. A line of a list that names a
        file inside that folder by its absolute path also comes back relative."""
        path = self.source_of(index)
        if self.file_list is not None:
            base = self.file_root if self.file_root is not None else urls.parent(os.fspath(self.file_list))
        elif self.file_root is not None:
            base = os.fspath(self.file_root)
        else:
            return path
        prefix = base.rstrip("/") + "/" if urls.is_url(base) else os.path.join(base, "")
        return path[len(prefix) :] if path.startswith(prefix) else path

    def content_digest(self) -> str:
        """A hash of the sample list (paths relative to their common folder, and labels): it
        identifies the dataset in position states and survives moving the dataset elsewhere."""
        self.prepare()
        h = paths_hash(self.paths) if self._paths_hash is None else self._paths_hash.copy()
        h.update(self.labels.tobytes())
        return h.hexdigest()[:16]

    def read(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Random access: the encoded bytes and the label of sample ``index``."""
        if not 0 <= index < len(self.paths):
            raise IndexError(f"readers.file: sample index {index} outside [0, {len(self.paths)})")
        path = self.paths[index]
        if self._prefetch is not None and (self._remote is None or self._remote[index]):
            try:
                data = self._prefetch.take(index)
            except StorageError as exc:
                raise type(exc)(f"readers.file: {exc}") from None
            return data, self.labels[index : index + 1].copy()
        try:
            data = read_file(path)
        except OSError as exc:
            raise ReaderError(f"readers.file: cannot read {path!r}: {exc.strerror or exc}") from None
        return data, self.labels[index : index + 1].copy()

    def _fetch(self, index: int) -> np.ndarray:
        return store.read(self.paths[index])

    def will_read(self, indices: Sequence[int], sequential: bool = False) -> None:
        """Fetch the object-store files of ``indices`` ahead (local files need no fetching)."""
        if self._prefetch is None:
            return
        if self._remote is not None:
            indices = [i for i in indices if self._remote[i]]
        sizes = self._sizes
        self._prefetch.want(indices, None if sizes is None else [sizes[i] for i in indices])

    def run_chunk(self, inputs, args, ctxs):
        """The chunk's samples: object-store files fetched together (those announced ahead are not
        fetched again); local files read one after another, their labels rows of one array. A
        sample outside the list, or a file that cannot be read, raises: the CPU stage then reads
        the chunk sample by sample, which names or skips it."""
        indices = [ctx.sample_index for ctx in ctxs]
        if self._prefetch is not None:
            self.will_read(indices)
            return super().run_chunk(inputs, args, ctxs)
        if not indices:
            return []
        if min(indices) < 0 or max(indices) >= len(self.paths):
            raise IndexError(f"readers.file: a sample index of the chunk is outside [0, {len(self.paths)})")
        paths = self.paths
        data = [read_file(paths[i]) for i in indices]
        return list(zip(data, self.labels[indices].reshape(len(indices), 1)))

    def close(self) -> None:
        """Stop fetching ahead and drop what was fetched."""
        if self._prefetch is not None:
            self._prefetch.close()

    def io_stats(self) -> dict[str, int]:
        """Object-store files: fetched ahead, found fetched, fetched on demand, dropped unread;
        requests in flight and bytes held now, and their peaks. Empty for local files."""
        if self._prefetch is None:
            return {}
        return {**self._prefetch.stats, **self._prefetch.in_flight()}
