"""The raypipe logger: warnings only by default, more on request, in this process and in others."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

from raypipe import log

SCRIPT = "from raypipe import log; l = log.get('cluster.service'); l.info('hello info'); l.warning('hello warning')"


def _run(env: dict) -> str:
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env={**os.environ, **env}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def test_quiet_by_default_and_louder_through_the_environment():
    quiet = _run({"RAYPIPE_LOG_LEVEL": ""})
    assert "hello warning" in quiet and "hello info" not in quiet
    loud = _run({"RAYPIPE_LOG_LEVEL": "info"})
    assert "raypipe INFO hello info" in loud and "raypipe WARNING hello warning" in loud


def test_module_loggers_sit_under_the_raypipe_logger(caplog):
    assert log.get("cluster.service").name == "raypipe.cluster.service"
    assert log.get("raypipe.executor").name == "raypipe.executor"
    before = log.LOGGER.level
    try:
        log.set_level("INFO")
        log.set_level(logging.INFO)
        assert sum(getattr(h, "_raypipe", False) for h in log.LOGGER.handlers) == 1, "one handler, however often"
        with caplog.at_level(logging.INFO, logger="raypipe"):
            log.get("cluster.coordinator").info("helper started")
        assert [r.name for r in caplog.records] == ["raypipe.cluster.coordinator"]
    finally:
        log.LOGGER.setLevel(before)
