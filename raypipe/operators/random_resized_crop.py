"""``random_resized_crop``: a random window (area and aspect ratio sampled per sample)
resized to a fixed size, as torchvision's RandomResizedCrop and DALI's operator do.

The window comes from the sample's keyed random stream, so the CPU and GPU
variants, and any number of threads, pick the same window for the same sample.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ArgumentError
from ..kernels import launch
from ..operator import Operator, Schema, register
from ..types import DALIDataType
from .cast import parse_dtype
from .crop_window import DRAWS, random_crop_window, random_crop_windows, window_arguments
from .host_resize import backend as host_resize_backend
from .resample import RESIZE_FILTERS, check_hwc, hwc_shapes, interp_filters, resample
from .resize import check_minibatch_size, check_temp_buffer_hint, host_resample


def _output_size(size: int | Sequence[int]) -> tuple[int, int]:
    sizes = (size, size) if isinstance(size, (int, np.integer)) else tuple(size)
    if len(sizes) != 2 or any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1 for s in sizes):
        raise ArgumentError(f"random_resized_crop: size must be a positive int or a pair (h, w), got {size!r}")
    return int(sizes[0]), int(sizes[1])


@register
class RandomResizedCrop(Operator):
    """Crop a random window of an HWC image and resize it to ``size`` = (h, w) (antialiased linear by
    default, or ``interp_type`` / ``min_filter`` / ``mag_filter`` as ``resize``); a sequence (FHWC)
    takes one window for all its frames."""

    schema = Schema("random_resized_crop", devices=("cpu", "gpu"))

    def preload(self) -> None:
        host_resize_backend()

    def configure(
        self,
        size: int | Sequence[int] | None = None,
        random_area: Sequence[float] = (0.08, 1.0),
        random_aspect_ratio: Sequence[float] = (3 / 4, 4 / 3),
        num_attempts: int = 10,
        antialias: bool = True,
        interp_type=None,
        min_filter=None,
        mag_filter=None,
        dtype: DALIDataType | np.dtype | str | None = None,
        temp_buffer_hint: int = 0,
        minibatch_size: int = 32,
    ) -> None:
        """``temp_buffer_hint`` and ``minibatch_size`` (DALI's GPU scratch size and images per
        launch) are validated and change nothing."""
        name = self.schema.name
        check_temp_buffer_hint(name, temp_buffer_hint)
        check_minibatch_size(name, minibatch_size)
        self.dtype = None if dtype is None else parse_dtype(name, "dtype", dtype)
        if size is None:
            raise ArgumentError(f"{name}: size is required (an int or a pair (h, w))")
        self.height, self.width = _output_size(size)
        self.random_area, self.random_aspect_ratio, self.num_attempts = window_arguments(
            name, random_area, random_aspect_ratio, num_attempts
        )
        self.antialias = bool(antialias)
        self.filters = interp_filters(name, RESIZE_FILTERS, interp_type, min_filter, mag_filter)

    def window(self, width: int, height: int, ctx) -> tuple[int, int, int, int]:
        """The crop window ``(x, y, w, h)`` of this sample in a ``width`` x ``height`` image."""
        draws = self.draws([ctx], DRAWS * self.num_attempts).reshape(DRAWS, self.num_attempts)
        return random_crop_window(width, height, self.random_area, self.random_aspect_ratio, draws)

    def _box(self, image, ctx) -> tuple[int, int, int, int]:
        check_hwc(self.schema.name, image)
        x, y, w, h = self.window(image.shape[1], image.shape[0], ctx)
        return x, y, x + w, y + h

    def compute(self, xp, inputs, args, ctx):
        image = inputs[0]
        if image.ndim == 4:  # a sequence (FHWC): one window for all its frames, as DALI
            box, dtype, size = self._box(image[0], ctx), self._dtype(image), (self.width, self.height)
            return xp.stack([resample(xp, f, *size, box, self.antialias, dtype, filters=self.filters) for f in image])
        box = self._box(image, ctx)
        return resample(
            xp, image, self.width, self.height, box, self.antialias, self._dtype(image), filters=self.filters
        )

    def _dtype(self, image) -> np.dtype | None:
        """The output type for ``image``: as DALI, the input's or float32."""
        if self.dtype is not None and self.dtype not in (np.dtype(image.dtype), np.dtype(np.float32)):
            raise ValueError(
                f"random_resized_crop: dtype must be the input's ({image.dtype}) or float, got {self.dtype}"
            )
        return self.dtype

    def run_sample(self, inputs, args, ctx):
        image = inputs[0]
        if image.ndim == 4:  # a sequence (FHWC): one window for all its frames, as DALI
            box, dtype, size = self._box(image[0], ctx), self._dtype(image), (self.width, self.height)
            return np.stack([host_resample(f, *size, self.filters, self.antialias, dtype, box) for f in image])
        box = self._box(image, ctx)
        return host_resample(image, self.width, self.height, self.filters, self.antialias, self._dtype(image), box)

    def run_batch(self, xp, inputs, args, ctxs):
        """Windows drawn on the host for the whole batch at once from each sample's keyed stream (the
        windows :meth:`compute` draws), then one batched crop-and-resize through the resampling
        kernels (:mod:`raypipe.kernels.resample`) when they can take the batch, else sample by sample.

        Tolerance against :meth:`run_sample`: ``resize``'s (uint8 within 2 grey levels of Pillow,
        mean difference below 0.1; other types: integers within 1, float32 within 1e-5 relative plus
        1e-4 absolute, float16 within one float16 step).
        """
        batch = inputs[0]
        if launch.shapes_of(batch).shape[1] == 4:  # sequences: the kernels take images
            return super().run_batch(xp, inputs, args, ctxs)
        shapes = hwc_shapes(self.schema.name, batch)
        dtype = launch.uniform_dtype(batch)
        out_elements = int(self.width * self.height * shapes[:, 2].sum())
        if (
            dtype is None
            or launch.store_rule(dtype) is None
            or not launch.available(xp, launch.elements(batch) + out_elements)
        ):
            return super().run_batch(xp, inputs, args, ctxs)
        out_dtype = self._dtype(np.empty(0, dtype)) or dtype
        draws = self.draws(ctxs, DRAWS * self.num_attempts).reshape(DRAWS, self.num_attempts, len(shapes))
        windows = random_crop_windows(shapes[:, [1, 0]].T, self.random_area, self.random_aspect_ratio, draws)
        boxes = np.concatenate([windows[:, :2], windows[:, :2] + windows[:, 2:]], axis=1)
        sizes = np.broadcast_to(np.array([self.width, self.height], np.int64), (len(shapes), 2))
        from ..kernels.resample import resample_batch

        packed = launch.pack(xp, batch, self.schema.name)
        return resample_batch(xp, packed, sizes, boxes, self.antialias, out_dtype, self.filters)
