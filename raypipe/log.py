"""The ``raypipe`` logger: quiet by default (warnings and errors only), louder on request.

Library code logs through ``logging.getLogger("raypipe.<module>")`` and never prints. The
level comes from ``RAYPIPE_LOG_LEVEL`` (``INFO``, ``DEBUG``...) when set, so the same setting
reaches pipeline actors, helpers and the coordinator (Ray workers inherit the environment
of ``ray job submit``'s runtime env or of the node), or from :func:`set_level` in a script.
"""

from __future__ import annotations

import logging
import os

LOGGER = logging.getLogger("raypipe")


def set_level(level: int | str) -> None:
    """Log raypipe's messages from ``level`` up to stderr (``"INFO"`` shows what services and
    helpers do; the default shows warnings only)."""
    LOGGER.setLevel(level.upper() if isinstance(level, str) else level)
    if not any(getattr(h, "_raypipe", False) for h in LOGGER.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s raypipe %(levelname)s %(message)s", "%H:%M:%S"))
        handler._raypipe = True
        LOGGER.addHandler(handler)


def get(name: str) -> logging.Logger:
    """The logger of module ``name`` under the raypipe logger (``cluster.service`` logs as
    ``raypipe.cluster.service``)."""
    return logging.getLogger(name if name.split(".")[0] == "raypipe" else f"raypipe.{name}")


LOGGER.setLevel(logging.WARNING)  # with no handler configured, Python prints warnings to stderr
if os.environ.get("RAYPIPE_LOG_LEVEL"):
    set_level(os.environ["RAYPIPE_LOG_LEVEL"])
