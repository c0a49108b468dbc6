"""The README's main job stopped with Ctrl-C: it says so, shuts its service down and exits with
130 within seconds, without a traceback."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

#: the progress bar once the ranks have trained on a batch: "training:   0%|  | 12/15000 ["
TRAINING = re.compile(rb"training: .*\| [1-9][0-9]*/[0-9]+ \[")


def test_ctrl_c_stops_the_ddp_example_cleanly():
    environ = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # its own local Ray
    proc = subprocess.Popen(
        [sys.executable, "examples/train_ddp.py", "--epochs", "50"],
        cwd=ROOT,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        # as in a terminal: a suite started in the background (`cmd &`) ignores SIGINT, its children too
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    said = bytearray()
    reader = threading.Thread(
        target=lambda: [said.extend(chunk) for chunk in iter(lambda: proc.stdout.read1(4096), b"")]
    )
    reader.start()
    deadline = time.monotonic() + 240
    while not TRAINING.search(said) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert proc.poll() is None, said.decode(errors="replace")[-3000:]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130, said.decode(errors="replace")[-3000:]
    reader.join(timeout=10)
    text = said.decode(errors="replace")
    assert "interrupted: the service is shut down" in text
    assert "Traceback" not in text
