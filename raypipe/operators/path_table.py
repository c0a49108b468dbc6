"""A listing's paths, stored compactly: each folder once and every file name in one string.

A million-file dataset held as a list of path strings costs 110-140 bytes a path (a string
object of the whole path, and its pointer), 140-180 MB in every process that opens it: the
driver, each pipeline actor and each CPU helper. A :class:`PathTable` holds the names' characters
and an 8-byte offset per path (25-35 bytes a path for ImageNet's), and makes a path string when
it is asked for one."""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import accumulate

#: offsets of 8 bytes, Python ints when indexed (numpy's scalars cost more to index and use)
_OFFSET = "q"


class PathTable(Sequence[str]):
    """Paths as folder prefixes and names, in listing order: ``table[i]`` is the prefix of path
    ``i``'s folder followed by its name (both as given: a prefix ends in "/" where it should)."""

    __slots__ = ("_prefixes", "_starts", "_text", "_at")

    def __init__(self, groups: Iterable[tuple[str, Sequence[str]]]) -> None:
        """``groups``: ``(prefix, names)`` pairs, the paths of each in the order given."""
        prefixes: list[str] = []
        starts: list[int] = []
        texts: list[str] = []
        at = array(_OFFSET, [0])
        for prefix, names in groups:
            if not names:
                continue
            prefixes.append(prefix)
            starts.append(len(at) - 1)
            texts.append("".join(names))
            ends = accumulate(map(len, names), initial=at[-1])
            next(ends)  # the group begins where the last one ended
            at.extend(ends)
        self._prefixes = prefixes
        self._starts = starts
        self._text = "".join(texts)
        self._at = at

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
        return self._prefixes[bisect_right(self._starts, i) - 1] + self._text[at[i] : at[i + 1]]

    def __iter__(self) -> Iterator[str]:
        text, at = self._text, self._at
        ends = self._starts[1:] + [len(self)]
        for prefix, first, end in zip(self._prefixes, self._starts, ends):
            for i in range(first, end):
                yield prefix + text[at[i] : at[i + 1]]

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same paths (a list of them too)."""
        return isinstance(other, Sequence) and not isinstance(other, str) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # compares equal to lists, which do not hash

    def __repr__(self) -> str:
        return f"PathTable({len(self)} paths in {len(self._prefixes)} folders)"

    def contains(self, part: str) -> bool:
        """True where a folder prefix or a name holds ``part`` (a quick test before a path-by-path
        one: a part that only a prefix and a name together hold is not found)."""
        return part in self._text or any(part in p for p in self._prefixes)
