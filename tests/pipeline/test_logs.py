"""Tests for subaudit.pipeline.logs: a job's start (its log file, warnings and fatal errors in
it, the imported modules frozen out of the garbage collector)."""

from __future__ import annotations

import subprocess
import sys

CODE = r'''
import gc, sys, warnings
import numpy
from subaudit.pipeline import logs

before = gc.get_freeze_count()
log = logs.start(sys.argv[1])
assert before == 0 and gc.get_freeze_count() > 1000, (before, gc.get_freeze_count())
log.info("started")
warnings.warn("a warning")
raise RuntimeError("the job failed")
'''


def test_a_job_logs_to_its_file_with_warnings_and_its_fatal_error(tmp_path):
    path = tmp_path / "logs" / "job.log"
    proc = subprocess.run([sys.executable, "-c", CODE, str(path)], capture_output=True, text=True)
    assert proc.returncode == 1 and "RuntimeError: the job failed" in proc.stderr
    text = path.read_text()
    assert "INFO subaudit: started" in text and "a warning" in text
    assert "CRITICAL subaudit: job failed: the job failed" in text
