"""Test videos written with PyAV (FFmpeg's encoders): frames whose content says which frame they
are (a moving bar and a level that grows with the frame number over colour gradients), encoded as
H.264 with B-frames (mp4), VP9 (webm, mkv), MJPEG (avi) or MPEG-4 Part 2 (mp4), with a short group
of pictures so that sequences start between key frames."""

from __future__ import annotations

import os

import numpy as np


def frame_image(k: int, height: int, width: int) -> np.ndarray:
    """Frame ``k``: RGB gradients, a red level of ``8 k`` and a bright bar at column ``3 k``."""
    image = np.zeros((height, width, 3), np.uint8)
    image[..., 0] = (8 * k) % 256
    image[..., 1] = (np.arange(width) * 255 // max(width - 1, 1))[None, :]
    image[..., 2] = (np.arange(height) * 255 // max(height - 1, 1))[:, None]
    image[:, (3 * k) % width] = 255
    return image


#: codec -> (PyAV encoder, pixel format, encoder options)
CODECS = {
    "h264": ("libx264", "yuv420p", {"bf": "2", "g": "8", "keyint_min": "8", "sc_threshold": "0"}),
    "vp9": ("libvpx-vp9", "yuv420p", {"g": "8"}),
    "mjpeg": ("mjpeg", "yuvj420p", {}),
    "mpeg4": ("mpeg4", "yuv420p", {"g": "8"}),
}


def write_video(path: str, frames: int, codec: str = "h264", size: tuple[int, int] = (48, 64), fps: int = 25) -> str:
    """Write ``frames`` frames of :func:`frame_image` to ``path`` (its extension picks the container)."""
    import av

    encoder, pix_fmt, options = CODECS[codec]
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with av.open(path, "w") as container:
        stream = container.add_stream(encoder, rate=fps, options=dict(options))
        stream.height, stream.width = size
        stream.pix_fmt = pix_fmt
        if "g" in options:
            stream.codec_context.gop_size = int(options["g"])
        for k in range(frames):
            frame = av.VideoFrame.from_ndarray(frame_image(k, *size), format="rgb24")
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return path


def decode_all(path: str) -> np.ndarray:
    """Every frame of ``path`` decoded in order from its start (no seeking): the reference."""
    import av
    from av.video.reformatter import Interpolation

    flags = Interpolation.BILINEAR | Interpolation.ACCURATE_RND | Interpolation.FULL_CHR_H_INT
    with av.open(path) as container:
        return np.stack(
            [f.reformat(format="rgb24", interpolation=flags).to_ndarray() for f in container.decode(video=0)]
        )
