"""A folder tree of classes in an object store, listed as ``readers.file`` lists a local
``file_root``: the class folders in one listing, then the objects directly inside each class
folder, ``LISTERS`` folders at once (a store serves about 1,000 keys per request, one request
after another within a folder); labels by the sorted class folders."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .failures import StorageError
from .store import list_folder
from .urls import join

LISTERS = 32  # class folders listed at once


def list_url_root(
    file_root: str, wanted_dir: Callable[[str], object] | None, wanted_file: Callable[[str], object]
) -> tuple[list[str], list[int], list[int], int]:
    """(urls, labels, sizes, class folders) of the objects ``file_root/<class>/<name>`` whose
    class and name match; sub-folders of a class folder and objects beside the classes are not read."""
    folders, beside = list_folder(file_root)
    if not folders and not beside:
        raise StorageError(f"readers.file: file_root {file_root!r} holds no objects (is the prefix right?)")
    classes = sorted(c for c in folders if wanted_dir is None or wanted_dir(c))
    with ThreadPoolExecutor(max(1, min(LISTERS, len(classes)))) as pool:
        inside = list(pool.map(lambda c: list_folder(join(file_root, c))[1], classes))
    urls, labels, sizes = [], [], []
    for label, objects in enumerate(inside):
        found = sorted((url, size) for url, size in objects if wanted_file(url.rsplit("/", 1)[1]))
        urls.extend(url for url, _ in found)
        sizes.extend(size for _, size in found)
        labels.extend([label] * len(found))
    return urls, labels, sizes, len(classes)
