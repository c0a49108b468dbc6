"""What every reader shares: DALI's common reader arguments, the reader's own (self-driven)
order, its metadata, and the identity that position states record.

A subclass lists its samples in :meth:`prepare` and gives ``__len__``, :meth:`digest`,
:meth:`source_of` and :meth:`read` (random access by sample index: the service drives every
reader with explicit indices)."""

from __future__ import annotations

import hashlib
import os
import posixpath
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from typing import Any

import numpy as np

from .. import reader_order
from ..batch_spec import BatchSpec
from ..errors import ArgumentError, ReaderError
from ..operator import Operator, Skip
from ..storage import urls
from .path_table import PathTable

# DALI reader arguments that change nothing here (buffering and memory hints): accepted with
# DALI's meaning so that ported pipelines run unchanged.
NO_OP_ARGS = (
    "dont_use_mmap",
    "lazy_init",
    "prefetch_queue_depth",
    "skip_cached_images",
    "tensor_init_bytes",
    "bytes_per_sample_hint",
    "preserve",
    "use_o_direct",
)


class ShardedReader(Operator):
    """Base class of readers. Subclasses call :meth:`configure_reader` from ``configure``."""

    #: Whether ``random_shuffle`` also shuffles the listing once, before sharding
    #: (:func:`raypipe.reader_order.listing_order`): DALI's readers of file listings do, its
    #: container readers (LMDB, TFRecord, RecordIO, tar) only pass their shard through the buffer.
    SHUFFLES_LISTING = False

    def configure_reader(
        self,
        *,
        shard_id: int = 0,
        num_shards: int = 1,
        random_shuffle: bool = False,
        initial_fill: int = 1024,
        pad_last_batch: bool = False,
        stick_to_shard: bool = False,
        read_ahead: bool = False,
        shuffle_after_epoch: bool = False,
        shuffle_after_epoch_seed: int | None = None,
        on_error: str = "raise",
        **dali_args: Any,
    ) -> None:
        """Validate and store the arguments every DALI reader takes, and ``on_error``: "raise"
        (a bad record stops the pipeline with an error naming it) or "skip" (it is dropped and
        counted, as decoders do). ``shuffle_after_epoch`` reorders the whole dataset every epoch,
        the same way on every shard (``shuffle_after_epoch_seed``, or a fixed seed as in DALI)."""
        op = self.schema.name
        unknown = sorted(set(dali_args) - set(NO_OP_ARGS))
        if unknown:
            raise ArgumentError(f"{op}: unexpected argument(s) {', '.join(unknown)}")
        if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 1:
            raise ArgumentError(f"{op}: num_shards must be a positive int, got {num_shards!r}")
        if isinstance(shard_id, bool) or not isinstance(shard_id, int) or not 0 <= shard_id < num_shards:
            raise ArgumentError(f"{op}: shard_id must be in [0, {num_shards}), got {shard_id!r}")
        if isinstance(initial_fill, bool) or not isinstance(initial_fill, int) or initial_fill < 1:
            raise ArgumentError(f"{op}: initial_fill must be a positive int, got {initial_fill!r}")
        self.shard_id, self.num_shards = shard_id, num_shards
        self.random_shuffle, self.initial_fill = bool(random_shuffle), initial_fill
        self.pad_last_batch, self.stick_to_shard = bool(pad_last_batch), bool(stick_to_shard)
        self.read_ahead = bool(read_ahead)
        if shuffle_after_epoch and (random_shuffle or stick_to_shard):
            clash = "random_shuffle" if random_shuffle else "stick_to_shard"
            raise ArgumentError(f"{op}: shuffle_after_epoch=True cannot be used with {clash}=True (as in DALI)")
        if shuffle_after_epoch_seed is not None and (
            isinstance(shuffle_after_epoch_seed, bool)
            or not isinstance(shuffle_after_epoch_seed, int)
            or shuffle_after_epoch_seed < 0
        ):
            raise ArgumentError(
                f"{op}: shuffle_after_epoch_seed must be a non-negative int, got {shuffle_after_epoch_seed!r}"
            )
        self.shuffle_after_epoch = bool(shuffle_after_epoch)
        self.shuffle_after_epoch_seed = (
            reader_order.DEFAULT_EPOCH_SHUFFLE_SEED if shuffle_after_epoch_seed is None else shuffle_after_epoch_seed
        )
        if on_error not in ("raise", "skip"):
            raise ArgumentError(f"{op}: on_error must be 'raise' or 'skip', got {on_error!r}")
        self.on_error = on_error

    def prepare(self) -> None:
        """List the samples (idempotent); raise ReaderError naming the file at fault."""
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def digest(self) -> str:
        """A short hash identifying the dataset's content layout (not where it lives): position
        states record it, so a pipeline asks for it at every ``state_dict()``. Worked out once per
        reader (its sample list is fixed once listed); an ImageNet-sized listing takes seconds."""
        cached = getattr(self, "_digest", None)
        if cached is None:
            cached = self._digest = self.content_digest()
        return cached

    def content_digest(self) -> str:
        """:meth:`digest`, worked out from the listed samples (each reader its own way)."""
        raise NotImplementedError

    def source_of(self, index: int) -> str:
        """Where sample ``index`` comes from, for error messages."""
        return f"sample {index}"

    def source_info(self, index: int) -> str:
        """DALI's ``source_info`` of sample ``index``'s data (``get_property``): where it comes from."""
        return self.source_of(index)

    def read(self, index: int) -> tuple[np.ndarray, ...]:
        """Random access: the outputs of sample ``index``."""
        raise NotImplementedError

    def will_read(self, indices: Sequence[int], sequential: bool = False) -> None:
        """A hint from the executor: these samples are read next (readers may read ahead).
        ``sequential`` says how the executor is driven: True when its batches read the data mostly
        in order (the reader's own order, a service's buffer shuffle or none), False for a global
        shuffle."""

    def close(self) -> None:
        """Release open files and I/O threads; the reader reopens them when read again."""

    def io_stats(self) -> dict[str, int]:
        """How the reader has read so far (container readers: direct reads, extents read ahead,
        their bytes, cache hits); empty when it keeps no such counts."""
        return {}

    def run_sample(self, inputs, args, ctx):
        try:
            out = self.read(ctx.sample_index)
        except ReaderError as exc:
            if self.on_error == "skip":
                return Skip(str(exc))
            raise
        return out[0] if self.num_outputs == 1 else out

    def run_chunk(self, inputs, args, ctxs):
        """:meth:`run_sample` of a chunk of samples, without the CPU stage's per-sample calls. A read
        that fails raises; the CPU stage then reads the chunk sample by sample, which names or skips it."""
        read = self.read
        if self.num_outputs == 1:
            return [read(ctx.sample_index)[0] for ctx in ctxs]
        return [read(ctx.sample_index) for ctx in ctxs]

    def check_shards(self, size: int) -> None:
        """Raise when ``size`` samples cannot fill every shard."""
        if size < self.num_shards:
            raise ReaderError(f"{self.schema.name}: {size} samples cannot fill {self.num_shards} shards")

    def order_fields(self) -> dict[str, Any]:
        """What this reader's own order depends on (for position states)."""
        return {
            "dataset_len": len(self),
            "dataset_digest": self.digest(),
            "shard_id": self.shard_id,
            "num_shards": self.num_shards,
            "random_shuffle": self.random_shuffle,
            "initial_fill": self.initial_fill,
            "stick_to_shard": self.stick_to_shard,
            "pad_last_batch": self.pad_last_batch,
            **({"shuffle_after_epoch_seed": self.shuffle_after_epoch_seed} if self.shuffle_after_epoch else {}),
            **({"shuffled_listing": True} if self._shuffled_listing() else {}),
        }

    def _shuffled_listing(self) -> bool:
        """Whether this reader's own order starts from the listing shuffled once."""
        return self.random_shuffle and self.SHUFFLES_LISTING

    def order_arguments(self) -> dict[str, Any]:
        """The arguments that decide which sample index each batch position gets, besides the
        dataset's length: readers of one pipeline read in step only when these are equal
        (:mod:`raypipe.aligned_readers`). Shuffling's ``initial_fill`` and ``seed``, and the epoch
        shuffle's seed, count only where that shuffle is on."""
        fields: dict[str, Any] = {
            "shard_id": self.shard_id,
            "num_shards": self.num_shards,
            "stick_to_shard": self.stick_to_shard,
            "pad_last_batch": self.pad_last_batch,
            "random_shuffle": self.random_shuffle,
            "shuffle_after_epoch": self.shuffle_after_epoch,
        }
        if self.random_shuffle:
            fields.update(initial_fill=self.initial_fill, seed=self.seed, shuffled_listing=self.SHUFFLES_LISTING)
        if self.shuffle_after_epoch:
            fields["shuffle_after_epoch_seed"] = self.shuffle_after_epoch_seed
        return fields

    def epoch_batches(self, batch_size: int, epoch: int, seed: int) -> list[BatchSpec]:
        """This reader's batches for ``epoch`` under its own sharding and shuffling."""
        return reader_order.epoch_batches(
            size=len(self),
            batch_size=batch_size,
            epoch=epoch,
            seed=seed,
            shard_id=self.shard_id,
            num_shards=self.num_shards,
            stick_to_shard=self.stick_to_shard,
            random_shuffle=self.random_shuffle,
            initial_fill=self.initial_fill,
            pad_last_batch=self.pad_last_batch,
            shuffle_after_epoch=self.shuffle_after_epoch,
            shuffle_after_epoch_seed=self.shuffle_after_epoch_seed,
            shuffled_listing=self._shuffled_listing(),
        )

    def meta(self, batch_size: int) -> dict[str, Any]:
        """DALI's reader metadata plus the batch count per epoch. As in DALI, ``epoch_size_padded``
        counts the samples with every shard topped up to the largest when ``pad_last_batch``."""
        size = len(self)
        per_epoch = reader_order.batches_per_epoch(size, batch_size, self.num_shards)
        padded = -(-size // self.num_shards) * self.num_shards if self.pad_last_batch else size
        return {
            "epoch_size": size,
            "epoch_size_padded": padded,
            "shard_id": self.shard_id,
            "number_of_shards": self.num_shards,
            "pad_last_batch": self.pad_last_batch,
            "stick_to_shard": self.stick_to_shard,
            "batches_per_epoch": per_epoch,
        }


def as_path_list(op: str, name: str, value: str | Sequence[str] | None, required: bool = True) -> list[str]:
    """A path or list of paths as a non-empty list of strings (DALI takes either)."""
    if value is None:
        if required:
            raise ArgumentError(f"{op}: {name} is required")
        return []
    items = [value] if isinstance(value, (str, os.PathLike)) else list(value)
    if required and not items:
        raise ArgumentError(f"{op}: {name} is empty")
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            raise ArgumentError(f"{op}: {name} must hold paths, got {item!r}")
    paths = [os.fspath(i) for i in items]
    refuse_unexpanded_home(op, name, paths)
    return paths


def refuse_unexpanded_home(op: str, name: str, paths: Sequence[str]) -> None:
    """ArgumentError for a path that begins with ``~`` and is no path as written: readers take
    paths as written, as DALI does (``~`` is the shell's), which would fail only at the first read."""
    if not any(map(str.startswith, paths, repeat("~"))):
        return
    for path in paths:
        if path.startswith("~") and not os.path.exists(path):
            raise ArgumentError(
                f"{op}: {name} {path!r} begins with '~', which readers do not expand: "
                f"pass os.path.expanduser({path!r}) ({os.path.expanduser(path)!r})"
            )


def paths_hash(paths: Sequence[str]) -> Any:
    """A sha256 over ``paths`` (local paths or URLs) relative to their common folder, each name
    ended by a zero byte: a reader's dataset identity that survives moving the dataset elsewhere.

    Each folder's absolute form and its place under the common folder are worked out once, not
    once per file (a million files share a thousand folders); a :class:`PathTable`'s names are
    hashed a group at a time. The hash is that of relating every path on its own
    (:func:`_relative_one_by_one`), which lists this cannot read take."""
    if len(paths) < 2:
        return _hash_names(os.path.basename(p) for p in paths)
    if isinstance(paths, PathTable) and paths.by_folder():
        return _hash_by_group(paths) or _hash_names(_relative_one_by_one(paths))
    folders: dict[str, str | None] = {}  # a path's folder as written -> its absolute, normalised form
    split = []
    for path in paths:
        cut = path.rfind("/")
        folder, name = ("/" if cut == 0 else path[: max(cut, 0)]), path[cut + 1 :]
        if folder not in folders:
            folders[folder] = _absolute_folder(folder)
        if name in ("", ".", "..") or folders[folder] is None:
            return _hash_names(_relative_one_by_one(paths))
        split.append((folder, name))
    common = os.path.commonpath(list(set(folders.values())))
    direct = {name for folder, name in split if folders[folder] == common}
    if len(direct) == 1:  # one name in the common folder: their common path may be that file
        return _hash_names(_relative_one_by_one(paths))
    under = _under(common, folders)
    return _hash_names(under[folder] + name for folder, name in split)


def _hash_by_group(table: PathTable) -> Any | None:
    """:func:`paths_hash` of a table whose groups are folders (:meth:`PathTable.by_folder`), its
    names hashed a group at a time (each group's text in a few calls); None where the paths must be
    related one at a time."""
    folders: dict[str, str | None] = {}
    groups = []
    for prefix, names in table.groups():  # names: each followed by a NUL
        folder = "/" if prefix == "/" else prefix[:-1]  # a path's folder as written, as paths_hash cuts it
        if folder not in folders:
            folders[folder] = _absolute_folder(folder)
        odd_name = names.startswith(("\0", ".\0", "..\0")) or any(n in names for n in ("\0\0", "\0.\0", "\0..\0"))
        if odd_name or folders[folder] is None:
            return None
        groups.append((folder, names))
    common = os.path.commonpath(list(set(folders.values())))
    direct = {name for folder, names in groups if folders[folder] == common for name in names[:-1].split("\0")}
    if len(direct) == 1:  # one name in the common folder: their common path may be that file
        return None
    under = _under(common, folders)
    h = hashlib.sha256()
    for folder, names in groups:
        at = under[folder]
        h.update(as_hashed(at + names[:-1].replace("\0", "\0" + at) + "\0" if at else names))
    return h


def _under(common: str, folders: dict[str, str | None]) -> dict[str, str]:
    """Each folder's place under ``common``: "" for ``common`` itself, else its relative path and "/"."""
    prefix = common if common.endswith("/") else common + "/"
    return {folder: "" if at == common else at[len(prefix) :] + "/" for folder, at in folders.items()}


#: what the joined names hold only where a name is not a normalised relative path: an empty
#: component, or (where a component begins with a dot) a "." or ".." one
_EMPTY_PART = ("//", "/\0", "\0/", "\0\0")
_DOT_PART = ("\0./", "\0../", "/./", "/../", "\0.\0", "\0..\0", "/.\0", "/..\0")


def paths_hash_under(base: str, table: PathTable) -> Any | None:
    """:func:`paths_hash` of the local paths ``base``/``name`` for the names of ``table`` (a file
    list's relative paths, under one prefix), worked out on each group's joined names in a few
    calls in C: each path is the normalised ``base`` and its name, so relating them to their common
    folder cuts the names' common folder off each. None (leaving it to :func:`paths_hash`) for URL
    bases, names that are not normalised relative paths, and names directly in their common folder
    (whose common path may be a file)."""
    if urls.is_url(base) or len(table) < 2:
        return None
    lowest = highest = None
    fewest_parts = None
    for _, text in table.groups():  # each name followed by a NUL
        joined = "\0" + text
        if any(bad in joined for bad in _EMPTY_PART):
            return None
        if ("/." in joined or "\0." in joined) and any(bad in joined for bad in _DOT_PART):
            return None
        names = text[:-1].split("\0")
        low, high, parts = min(names), max(names), min(map(str.count, names, repeat("/")))
        lowest = low if lowest is None else min(lowest, low)
        highest = high if highest is None else max(highest, high)
        fewest_parts = parts if fewest_parts is None else min(fewest_parts, parts)
    shared = os.path.commonprefix([lowest, highest])
    common = shared[: shared.rfind("/") + 1]  # the names' common folder, "" or ending in "/"
    if fewest_parts <= common.count("/"):
        return None
    h = hashlib.sha256()
    for _, text in table.groups():
        h.update(as_hashed(("\0" + text).replace("\0" + common, "\0")[1:] if common else text))
    return h


def _absolute_folder(folder: str) -> str | None:
    """The absolute, normalised POSIX form of a path's folder (a local folder or a URL prefix,
    ``""`` the working folder); None for a URL prefix whose key is not normalised (``//``, ``..``)."""
    at = urls.as_posix(folder) if folder else os.path.abspath("")
    normal = posixpath.normpath(at)
    return normal if normal == (at.rstrip("/") or "/") else None


def _relative_one_by_one(paths: Sequence[str]) -> Iterator[str]:
    """Each path relative to the common folder of them all, related one path at a time."""
    where = [urls.as_posix(p) for p in paths]
    common = os.path.commonpath(where)
    return (os.path.relpath(at, common) for at in where)


def _hash_names(names: Iterable[str]) -> Any:
    h = hashlib.sha256()
    h.update(b"".join(as_hashed(name) + b"\0" for name in names))
    return h


def as_hashed(text: str) -> bytes:
    """The bytes of names in a dataset identity: UTF-8, a file name that is not (decoded by Python
    with surrogates) as its own bytes."""
    return text.encode(errors="surrogateescape")
