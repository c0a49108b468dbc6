"""A listing's paths, stored compactly: each folder once and every file name in one string.

A million-file dataset held as a list of path strings costs 110-140 bytes a path (a string
object of the whole path, and its pointer), 140-180 MB in every process that opens it: the
driver, each pipeline actor and each CPU helper. A :class:`PathTable` holds the names' characters
and an 8-byte offset per path (about 30 bytes a path for ImageNet's), and makes a path string when
it is asked for one."""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate, repeat

#: offsets of 8 bytes, Python ints when indexed (numpy's scalars cost more to index and use)
_OFFSET = "q"


class PathTable(Sequence[str]):
    """Paths as folder prefixes and names, in the order given: ``table[i]`` is the prefix of path
    ``i``'s group followed by its name. Each name is kept with a NUL after it (no path holds one),
    so that a group's names are one slice of the table's text (:meth:`groups`)."""

    __slots__ = ("_prefixes", "_starts", "_text", "_at")

    def __init__(self, groups: Iterable[tuple[str, Sequence[str]]]) -> None:
        """``groups``: ``(prefix, names)`` pairs, the paths of each in the order given. The names
        of one group are dropped once stored (``groups`` may make them one group at a time)."""
        prefixes: list[str] = []
        known: dict[str, str] = {}  # one string per distinct prefix, however many groups share it
        starts = array(_OFFSET)
        texts: list[str] = []
        at = array(_OFFSET, [0])
        for prefix, names in groups:
            if not names:
                continue
            prefixes.append(known.setdefault(prefix, prefix))
            starts.append(len(at) - 1)
            texts.append("\0".join(names) + "\0")
            ends = accumulate(map((1).__add__, map(len, names)), initial=at[-1])  # a name and its NUL
            next(ends)  # the group begins where the last one ended
            at.extend(ends)
        self._prefixes = prefixes
        self._starts = starts
        self._text = "".join(texts)
        self._at = at
        if self._text.count("\0") != len(self):
            raise ValueError("a path holds a NUL character")

    @classmethod
    def of(cls, paths: Iterable[str]) -> PathTable:
        """The table of ``paths``, each split at its last "/": a run of paths in one folder is one
        group (a list sorted by folder, as listings and ImageNet's file lists are, makes one group
        per folder; a shuffled one, more groups of the same prefixes)."""

        def runs() -> Iterator[tuple[str, list[str]]]:
            prefix, names = None, []
            for head, cut, name in map(str.rpartition, paths, repeat("/")):
                if head + cut != prefix:
                    if names:
                        yield prefix, names
                    prefix, names = head + cut, []
                names.append(name)
            if names:
                yield prefix, names

        return cls(runs())

    @classmethod
    def compacted(cls, paths: Sequence[str]) -> Sequence[str]:
        """``paths`` as a table where neighbours mostly share their folder (a sorted list, as
        listings and ImageNet's file lists are), else as given: a shuffled list would make a
        group per path, no smaller and slower to make. Judged on about 1,000 neighbouring pairs."""
        pairs = range(0, len(paths) - 1, max(1, len(paths) // 1024))
        shared = sum(paths[i].rpartition("/")[0] == paths[i + 1].rpartition("/")[0] for i in pairs)
        return cls.of(paths) if pairs and shared >= 0.75 * len(pairs) else paths

    def __len__(self) -> int:
        return len(self._at) - 1

    def __getitem__(self, index):  # type: ignore[override]  # int -> str, slice -> list[str]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        at = self._at
        size = len(at) - 1
        i = index + size if index < 0 else index
        if not 0 <= i < size:
            raise IndexError(f"path index {index} outside [{-size}, {size})")
        return self._prefixes[bisect_right(self._starts, i) - 1] + self._text[at[i] : at[i + 1] - 1]

    def __iter__(self) -> Iterator[str]:
        for prefix, names in self.groups():
            yield from map(prefix.__add__, names[:-1].split("\0"))

    def groups(self) -> Iterator[tuple[str, str]]:
        """Each group's prefix and its names, each followed by a NUL, as one string."""
        text, at = self._text, self._at
        ends = [*self._starts[1:], len(self)]
        for prefix, first, end in zip(self._prefixes, self._starts, ends):
            yield prefix, text[at[first] : at[end]]

    def by_folder(self) -> bool:
        """True where each group's paths are files directly in one folder: every prefix is empty or
        ends in "/", and no name holds a "/"."""
        return "/" not in self._text and all(p.endswith("/") for p in set(self._prefixes) if p)

    def contains(self, part: str) -> bool:
        """True where a folder prefix or a name holds ``part`` (a quick test before a path-by-path
        one: a part that only a prefix and a name together hold is not found)."""
        return part in self._text or any(part in p for p in set(self._prefixes))

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same paths (a list of them too)."""
        return isinstance(other, Sequence) and not isinstance(other, str) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # compares equal to lists, which do not hash

    def __repr__(self) -> str:
        return f"PathTable({len(self)} paths in {len(self._prefixes)} groups)"
