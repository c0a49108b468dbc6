"""A loader's position in a training checkpoint: one call to save it beside the model, one to read it.

Ray Train (and any checkpointing that writes a folder) keeps the model, the optimizer and, with
these, where every rank's loader was. The position is global (epoch, stream offset), the same on
every rank of a group that steps together, so one rank writes it and a group of any size resumes
from it: ``rp.loader(name)`` inside a Ray Train worker loads it from the restored checkpoint by
itself; elsewhere ``loader.load_state_dict(rp.train.load(folder, name))``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .errors import ArgumentError

FILE_PREFIX = "raypipe-loader."


def file_name(service: str) -> str:
    """The file that holds service ``service``'s loader position in a checkpoint folder (one per
    service, so a training and a validation loader can share a checkpoint)."""
    return f"{FILE_PREFIX}{service}.json"


def save(loader: Any, directory: str | os.PathLike) -> str:
    """Write ``loader``'s position (:meth:`state_dict`, a small dict) into checkpoint folder
    ``directory`` (created if missing); returns the file's path."""
    state = loader.state_dict()
    name = getattr(loader, "name", None)
    if not isinstance(name, str):
        raise ArgumentError(f"rp.train.save: expects an rp.loader, got {type(loader).__name__}")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(os.fspath(directory), file_name(name))
    partial = path + ".partial"
    with open(partial, "w") as out:
        json.dump(state, out)
    os.replace(partial, path)
    return path


def load(directory: str | os.PathLike, service: str) -> dict[str, Any] | None:
    """Service ``service``'s loader position saved in checkpoint folder ``directory``, or None
    when the checkpoint holds none (a checkpoint written before the loader's was)."""
    path = os.path.join(os.fspath(directory), file_name(service))
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as exc:
        raise ArgumentError(f"rp.train.load: {path} is not a loader position ({exc})") from exc
