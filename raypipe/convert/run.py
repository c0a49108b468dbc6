"""Running a conversion: parts written in parallel, each made durable before it is marked
done, so that re-running after an interruption skips finished parts.

Sharded formats (TFRecord, WebDataset, RecordIO): one shard per part, written by a pool of
processes into a scratch folder and moved into place with its index; then a marker
``.raypipe-convert/NAME.done`` is written. LMDB formats (Caffe, Caffe2): one database, parts
are transactions written in order by one writer while threads read the next files; a part's
marker follows its commit (its keys are deterministic, so a part rewritten after a crash
overwrites the same entries)."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field

from ..errors import ReaderError, UsageError
from ..formats.registry import CLASSES, MANIFEST, STATE, Format
from .plan import Part, Source, plan_parts


@dataclass
class Summary:
    """What a conversion did."""

    format: str
    dst: str
    samples: int = 0
    bytes: int = 0
    bytes_written: int = 0  # by this run, not by an earlier one it resumed
    classes: int = 0
    parts: int = 0
    parts_skipped: int = 0
    seconds: float = 0.0
    files: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def convert(
    source: Source,
    dst: str,
    fmt: Format,
    *,
    part_size: int,
    workers: int,
    progress: Callable[[int], None] | None = None,
) -> Summary:
    """Write ``source`` into ``dst`` as ``fmt``; skip the parts a previous run finished."""
    began = time.perf_counter()
    if not source.samples:
        raise UsageError("convert: the source lists no samples")
    check_destination(dst, fmt, source, part_size)
    suffix = fmt.writer_class().suffix if fmt.sharded else ""
    parts = plan_parts(source.samples, part_size, "part" if not fmt.sharded else "shard", suffix)
    todo = [p for p in parts if not os.path.exists(_marker(dst, p))]
    summary = Summary(fmt.name, dst, classes=len({s.label for s in source.samples}), parts=len(parts))
    summary.parts_skipped = len(parts) - len(todo)
    for p in parts:
        if p not in todo:
            done = _read_marker(dst, p)
            summary.samples += done["samples"]
            summary.bytes += done["bytes"]
            if progress is not None:
                progress(done["samples"])
    write = _write_shards if fmt.sharded else _write_database
    for done in write(todo, dst, fmt, workers):
        summary.samples += done["samples"]
        summary.bytes += done["bytes"]
        summary.bytes_written += done["bytes"]
        if progress is not None:
            progress(done["samples"])
    if source.classes:
        with open(os.path.join(dst, CLASSES), "w", encoding="utf-8") as f:
            f.writelines(f"{label} {name}\n" for label, name in enumerate(source.classes))
    summary.files = sorted(os.path.join(dst, p.name) for p in parts) if fmt.sharded else [dst]
    summary.seconds = time.perf_counter() - began
    return summary


def check_destination(dst: str, fmt: Format, source: Source, part_size: int) -> None:
    """Record what ``dst`` receives; UsageError if it holds a conversion of something else."""
    os.makedirs(os.path.join(dst, STATE), exist_ok=True)
    path = os.path.join(dst, MANIFEST)
    manifest = {"format": fmt.name, "source": source.digest(), "samples": len(source.samples), "part_size": part_size}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            previous = json.load(f)
        if previous != manifest:
            changed = sorted(k for k in manifest if previous.get(k) != manifest[k])
            raise UsageError(
                f"convert: {dst!r} holds an unfinished or finished conversion with another {', '.join(changed)} "
                f"({previous}); remove it or choose another destination"
            )
        return
    _write_json(path, manifest)


def _marker(dst: str, part: Part) -> str:
    return os.path.join(dst, STATE, f"{part.name}.done")


def _read_marker(dst: str, part: Part) -> dict:
    with open(_marker(dst, part), encoding="utf-8") as f:
        return json.load(f)


def _write_json(path: str, value: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read_image(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ReaderError(f"convert: cannot read {path!r}: {exc.strerror or exc}") from None


def _write_shards(parts: list[Part], dst: str, fmt: Format, workers: int):
    if not parts:
        return
    if workers <= 1 or len(parts) == 1:
        for part in parts:
            yield write_shard(part, dst, fmt.name)
        return
    with ProcessPoolExecutor(min(workers, len(parts))) as pool:
        futures = [pool.submit(write_shard, part, dst, fmt.name) for part in parts]
        for future in as_completed(futures):
            yield future.result()


def write_shard(part: Part, dst: str, format_name: str) -> dict:
    """Write one shard and its index into a scratch folder, move both into ``dst``, then mark
    the part done. Runs in a worker process."""
    from ..formats.registry import get

    fmt = get(format_name)
    scratch = os.path.join(dst, STATE, f"{part.name}.partial")
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    writer = fmt.writer_class()(os.path.join(scratch, part.name))
    for sample in part.samples:
        writer.add(sample.key, _read_image(sample.path), sample.label)
    result = writer.close()
    final = os.path.join(dst, part.name)
    if result.get("index"):
        os.replace(result["index"], fmt.index_path(final))
    os.replace(os.path.join(scratch, part.name), final)
    shutil.rmtree(scratch, ignore_errors=True)
    done = {"samples": result["samples"], "bytes": result["bytes"]}
    _write_json(_marker(dst, part), done)
    return done


def _write_database(parts: list[Part], dst: str, fmt: Format, workers: int):
    if not parts:
        return
    fresh = not any(name.endswith(".done") for name in os.listdir(os.path.join(dst, STATE)))
    with ThreadPoolExecutor(max(1, workers)) as pool:
        for part in parts:
            images = pool.map(_read_image, [s.path for s in part.samples])
            writer = fmt.writer_class()(dst, append=not (fresh and part is parts[0]))
            for sample, data in zip(part.samples, images):
                writer.add(sample.key, data, sample.label)
            result = writer.close()
            done = {"samples": result["samples"], "bytes": result["bytes"]}
            _write_json(_marker(dst, part), done)
            yield done
