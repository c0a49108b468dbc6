"""What an ImageNet-sized ``file_root`` costs before and between batches: listing it, the dataset
digest that position states record, building the pipeline, its first batch, and ``state_dict()``.

    python benchmarks/dataset_scale.py [--classes 1000] [--per-class 1281] [--root DIR]

The tree (``--classes`` class folders of ``--per-class`` files, 1,281,000 by default, ImageNet's
training set) is made of hard links to 20 generated JPEGs (the ones ``raypipe bench`` uses), so
it takes seconds and almost no disk; it is kept in ``--root`` (default
``~/.cache/raypipe/bench/scale-<classes>x<per-class>``) for the next run. The digest is timed the
four ways it is worked out from a list of paths, all giving the same hash (checked): as a
``file_root`` is listed (a folder's names hashed at once), from a sorted ``files`` list (kept as a
table of folders and names, each folder's names hashed at once), from a ``files`` list in no
folder order (each folder related to the common folder once), and as the definition has it (every
path related on its own).
A ``file_list`` of the same files (written beside the tree once) is read and hashed as raypipe
does it (the whole text in a few calls, the hash from its names) and, for reference, line by line
then from the paths; both give the same paths, labels and hash (checked). Wall seconds, one
process, the ResNet-50 training recipe on the host (batch 64, 2 threads). Last, the memory the
listing's paths hold as raypipe keeps them (folder prefixes and one string of names) and as a list
of path strings, and what a path by a random index costs in each.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time

from raypipe.bench.dataset import prepare
from raypipe.operators import reader_base, readers
from raypipe.operators.path_table import PathTable
from raypipe.presets import resnet50_train

SOURCES = 20  # hard links per JPEG stay under ext4's 65,000 for a million files


def make_tree(root: str, classes: int, per_class: int) -> int:
    """Fill ``root`` with ``classes`` folders of ``per_class`` hard links (what is there stays)."""
    sources = prepare(None, 64).paths[:SOURCES]
    made = 0
    for c in range(classes):
        folder = os.path.join(root, f"n{c:08d}")
        os.makedirs(folder, exist_ok=True)
        present = set(os.listdir(folder))
        for i in range(per_class):
            name = f"n{c:08d}_{i:05d}.JPEG"
            if name not in present:
                os.link(sources[(c * per_class + i) % len(sources)], os.path.join(folder, name))
                made += 1
    return made


def timed(work):
    began = time.perf_counter()
    result = work()
    return result, time.perf_counter() - began


def listing_and_digests(root: str) -> tuple[float, float, float, float]:
    """Seconds to list ``root`` (hashing it as listed), and to work the digest out from a ``files``
    list of the listed paths as a reader keeps it (a table, hashed a folder's names at once), from
    the plain list (each folder related once: a list in no folder order) and path by path; all four
    hashes are checked equal."""
    (paths, _, listed), listing = timed(lambda: readers.list_local_root(root))
    strings = list(paths)
    table, as_table = timed(lambda: reader_base.paths_hash(PathTable.compacted(strings)).hexdigest())
    fast, by_folder = timed(lambda: reader_base.paths_hash(strings).hexdigest())
    slow, one_by_one = timed(lambda: reader_base._hash_names(reader_base._relative_one_by_one(strings)).hexdigest())
    if not listed.hexdigest() == table == fast == slow:
        raise AssertionError(
            f"the digests differ: {listed.hexdigest()} listed, {table} as a table, {fast} by folder, "
            f"{slow} path by path"
        )
    return listing, as_table, by_folder, one_by_one


def file_list_reads(root: str) -> tuple[float, float]:
    """Seconds to read a ``file_list`` of the tree's files (written beside it once) and work out its
    digest as raypipe does (the text a chunk at a time, the hash from its names) and line by line then
    from the paths (the reference); the paths, labels and hashes are checked equal."""
    listing = root.rstrip("/") + ".list.txt"
    if not os.path.exists(listing):
        paths, labels = readers.list_file_root(root)
        with open(listing + ".part", "w") as f:
            f.writelines(f"{os.path.relpath(p, root)} {label}\n" for p, label in zip(paths, labels))
        os.replace(listing + ".part", listing)
    (paths, labels, listed), fast = timed(lambda: readers.read_file_list(listing, root))

    def by_line() -> tuple:
        with open(listing) as f:
            lines = f.read().splitlines()
        line_paths, line_labels = readers._parsed_line_by_line(lines, root, listing)
        return line_paths, line_labels, reader_base.paths_hash(line_paths)

    (line_paths, line_labels, line_hash), slow = timed(by_line)
    same = paths == line_paths and labels.tolist() == line_labels
    if not same or listed is None or listed.hexdigest() != line_hash.hexdigest():
        raise AssertionError("the file list reads or hashes differently at once and line by line")
    return fast, slow


def held_and_indexed(root: str) -> list[tuple[str, float, float]]:
    """The listing's paths as raypipe keeps them (:class:`PathTable`) and as a list of path strings
    (the reference): the MB each holds (tracemalloc) and the ns a path by a random index costs."""
    import random
    import tracemalloc

    def held(make):
        gc.collect()
        tracemalloc.start()
        made = make()
        size = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        return made, size / 2**20

    def indexed(paths) -> float:
        order = random.Random(0).choices(range(len(paths)), k=min(200_000, 10 * len(paths)))
        best = min(timed(lambda: [paths[i] for i in order])[1] for _ in range(5))
        return best / len(order) * 1e9

    table, table_mb = held(lambda: readers.list_local_root(root)[0])
    strings, strings_mb = held(lambda: list(table))
    if table != strings:
        raise AssertionError("the table holds other paths than the list")
    return [
        ("listed file_root, as raypipe keeps them (PathTable)", table_mb, indexed(table)),
        ("the same paths as a list of strings (reference)", strings_mb, indexed(strings)),
    ]


def measure(root: str) -> list[tuple[str, float]]:
    """Seconds of each step, in the order a training script meets them."""
    listing, as_table, by_folder, one_by_one = listing_and_digests(root)
    list_at_once, list_by_line = file_list_reads(root)
    pipe = resnet50_train(root, batch_size=64, num_threads=2, seed=0)
    _, build = timed(pipe.build)
    _, first = timed(pipe.run)
    _, state = timed(pipe.state_dict)
    _, again = timed(pipe.state_dict)
    pipe.close()
    return [
        ("list the folders, hashing them as listed (raypipe, file_root)", listing),
        ("dataset digest of a files list of the paths, kept as a table (raypipe, a sorted files list)", as_table),
        ("the same, each folder related once (raypipe, a files list in no folder order)", by_folder),
        ("dataset digest of the paths, each path related on its own (reference)", one_by_one),
        ("read a file_list of the same files and hash it, at once (raypipe)", list_at_once),
        ("read it line by line, then hash the paths by folder (reference)", list_by_line),
        ("build the pipeline (lists again)", build),
        ("first batch", first),
        ("first state_dict()", state),
        ("every later state_dict()", again),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--per-class", type=int, default=1281)
    parser.add_argument("--root", default=None, help="where the tree of hard links is kept")
    args = parser.parse_args(argv)
    if args.classes < 1 or args.per_class < 1 or args.classes * args.per_class < 2:
        parser.error("--classes and --per-class must be positive, with at least 2 files in all")
    root = args.root or os.path.expanduser(f"~/.cache/raypipe/bench/scale-{args.classes}x{args.per_class}")
    made, seconds = timed(lambda: make_tree(root, args.classes, args.per_class))
    total = args.classes * args.per_class
    print(f"{total:,} files in {args.classes:,} class folders at {root} ({made:,} links made in {seconds:.1f} s)")
    rows = measure(root)
    print("\n| step | seconds |\n|---|---|")
    for step, value in rows:
        print(f"| {step} | {value:.3f} |")
    kept = held_and_indexed(root)
    print("\n| paths | MB held | ns a path by index |\n|---|---|---|")
    for what, mb, ns in kept:
        print(f"| {what} | {mb:.3f} | {ns:.0f} |")
    digests, lists = rows[3][1] / max(rows[1][1], 1e-9), rows[5][1] / max(rows[4][1], 1e-9)
    print(f"\nthe digest of a sorted files list: {digests:.1f}x faster than path by path; all four the same hash")
    print(f"the file list at once: {lists:.1f}x faster than line by line, the same paths, labels and hash")
    print(f"the listing's paths held in {kept[0][1] / max(kept[1][1], 1e-9):.2f}x the memory of a list of strings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
