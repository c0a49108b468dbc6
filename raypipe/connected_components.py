"""Connected components of a label map (any number of dimensions), vectorised with numpy.

Two elements are connected when they share a face (4-connectivity in 2-D, 6 in 3-D, as DALI's
``segmentation.random_object_bbox``) and are both foreground with, unless ``ignore_class``, the
same value. The components come out with their class, size and bounding box, in the order of
their first element in memory (C order).

Labelling is union-find over the edges between neighbours, run as whole-array steps: every edge
hooks the larger of its two roots under the smaller (``np.minimum.at``), then pointers jump to
their roots, until no edge joins two roots; a handful of rounds for compact objects.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Components:
    """The components of a label map: ``classes``, ``sizes`` (elements), ``starts`` and ``ends``
    (bounding boxes, ``(count, ndim)``, end exclusive), ordered by their first element."""

    classes: np.ndarray
    sizes: np.ndarray
    starts: np.ndarray
    ends: np.ndarray


def _edges(labels: np.ndarray, foreground: np.ndarray, ignore_class: bool) -> tuple[np.ndarray, np.ndarray]:
    """Flat indices ``(u, v)`` of every pair of connected face neighbours."""
    flat = np.arange(labels.size, dtype=np.int64).reshape(labels.shape)
    us, vs = [], []
    for axis in range(labels.ndim):
        if labels.shape[axis] < 2:
            continue
        low = tuple(slice(None, -1) if a == axis else slice(None) for a in range(labels.ndim))
        high = tuple(slice(1, None) if a == axis else slice(None) for a in range(labels.ndim))
        joined = foreground[low] & foreground[high]
        if not ignore_class:
            joined &= labels[low] == labels[high]
        u = flat[low][joined]
        us.append(u)
        vs.append(u + flat.strides[axis] // flat.itemsize)
    if not us:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(us), np.concatenate(vs)


def _roots(count: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Each of ``count`` nodes' component root (its smallest node) given edges ``u``-``v``."""
    parent = np.arange(count, dtype=np.int64)
    while True:
        pu, pv = parent[u], parent[v]
        apart = pu != pv
        if not apart.any():
            return parent
        u, v, pu, pv = u[apart], v[apart], pu[apart], pv[apart]
        np.minimum.at(parent, np.maximum(pu, pv), np.minimum(pu, pv))
        while True:
            jumped = parent[parent]
            if np.array_equal(jumped, parent):
                break
            parent = jumped


def label_components(labels: np.ndarray, background: int = 0, ignore_class: bool = False) -> Components:
    """The connected components of ``labels``' elements other than ``background``."""
    labels = np.ascontiguousarray(labels)
    foreground = labels != background
    where = np.flatnonzero(foreground)
    ndim = labels.ndim
    if not len(where):
        empty = np.empty((0, ndim), np.int64)
        return Components(np.empty(0, labels.dtype), np.empty(0, np.int64), empty, empty)
    dense = np.full(labels.size, -1, np.int64)
    dense[where] = np.arange(len(where))
    u, v = _edges(labels, foreground, ignore_class)
    roots = _roots(len(where), dense[u], dense[v])
    ids, first, component = np.unique(roots, return_index=True, return_inverse=True)
    coords = np.stack(np.unravel_index(where, labels.shape), axis=1)
    starts = np.full((len(ids), ndim), np.iinfo(np.int64).max, np.int64)
    ends = np.full((len(ids), ndim), -1, np.int64)
    np.minimum.at(starts, component, coords)
    np.maximum.at(ends, component, coords + 1)
    sizes = np.bincount(component, minlength=len(ids))
    return Components(labels.reshape(-1)[where[first]], sizes, starts, ends)
