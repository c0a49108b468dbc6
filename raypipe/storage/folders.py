"""A folder tree of classes in an object store, listed as ``readers.file`` lists a local
``file_root``: one listing of every key under the URL (streamed), the objects directly inside
each class folder kept, labels by the sorted class folders."""

from __future__ import annotations

from collections.abc import Callable

from .failures import StorageError
from .store import list_objects
from .urls import parse


def list_url_root(
    file_root: str, wanted_dir: Callable[[str], object] | None, wanted_file: Callable[[str], object]
) -> tuple[list[str], list[int], list[int], int]:
    """(urls, labels, sizes, class folders) of the objects ``file_root/<class>/<name>`` whose
    class and name match; sub-folders of a class folder and objects beside the classes are not read."""
    u = parse(file_root)
    root = u.key.rstrip("/")
    skip = len(root) + 1 if root else 0
    by_class: dict[str, list[tuple[str, int]]] = {}
    objects = 0
    for url, size in list_objects(file_root):
        objects += 1
        rel = url[len(f"{u.scheme}://{u.bucket}/") + skip :]
        cls, sep, name = rel.partition("/")
        if not sep or "/" in name or not name:
            continue
        if cls not in by_class:
            by_class[cls] = []
        if wanted_file(name):
            by_class[cls].append((url, size))
    if not objects:
        raise StorageError(f"readers.file: file_root {file_root!r} holds no objects (is the prefix right?)")
    classes = sorted(c for c in by_class if wanted_dir is None or wanted_dir(c))
    urls, labels, sizes = [], [], []
    for label, cls in enumerate(classes):
        found = sorted(by_class[cls])
        urls.extend(url for url, _ in found)
        sizes.extend(size for _, size in found)
        labels.extend([label] * len(found))
    return urls, labels, sizes, len(classes)
