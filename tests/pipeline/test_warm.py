"""Tests for subaudit.pipeline.warm: a job handed to the warm worker runs as its own process
would (arguments, directory, environment, streams, exit status, signals), the worker refuses
what it cannot run that way, never outlives the workflow or lets a job outlive its process, and
the workflow's scripts all hand over first.  The tiny workflow's jobs, warm against cold:
tests/workflow/test_workflow.py."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from subaudit.pipeline import warm

JOB = r'''
from subaudit.pipeline import warm
warm.hand_over()
import json, os, sys, tempfile, time
if sys.argv[1] == "sleep":
    print(os.getpid(), flush=True)
    time.sleep(60)
if sys.argv[1] == "raise":
    raise ValueError("the job failed")
if sys.argv[1] == "say":
    sys.stdout.write("unflushed")
    sys.exit("a message")
print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "tmp": tempfile.gettempdir(),
                  "path0": sys.path[0], "stdin": sys.stdin.read(),
                  "ppid": os.getppid()}))
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
'''

ONE_THREAD = {k: "1" for k in ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")}


def environment(**changes: str) -> dict[str, str]:
    """A job's environment: this process's with one thread (as Snakemake gives a one-thread job),
    without pytest's variable for the current test (which changes between setup and call)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    return {**env, **ONE_THREAD, **changes}


@pytest.fixture
def worker(tmp_path, monkeypatch):
    """A worker started by this process (as the Snakefile's onstart does), ready."""
    monkeypatch.delenv(warm.ENV, raising=False)
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    started = warm.start(["json"], log=tmp_path / "worker.log")
    for _ in range(200):
        if "ready" in (tmp_path / "worker.log").read_text():
            break
        time.sleep(0.05)
    yield started
    started.stop()


def run_job(tmp_path: Path, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "job.py"
    script.write_text(JOB)
    return subprocess.run([sys.executable, str(script), *args], input=stdin, capture_output=True, text=True,
                          cwd=tmp_path, env=environment(**env))


def test_a_handed_over_job_runs_as_its_own_process_would(worker, tmp_path):
    cold = run_job(tmp_path, "3", "more", stdin="input", TMPDIR=str(tmp_path), **{warm.ENV: "0"})
    warmed = run_job(tmp_path, "3", "more", stdin="input", TMPDIR=str(tmp_path))  # adopted
    assert cold.returncode == warmed.returncode == 3
    assert cold.stderr == warmed.stderr == "to stderr\n"
    got_cold, got_warm = json.loads(cold.stdout), json.loads(warmed.stdout)
    assert got_warm["ppid"] == worker.process.pid != got_cold["ppid"]  # it did run in the worker
    got_cold.pop("ppid"), got_warm.pop("ppid")
    assert got_warm == got_cold == {"argv": ["3", "more"], "cwd": str(tmp_path), "tmp": str(tmp_path),
                                    "path0": str(tmp_path), "stdin": "input"}
    assert "job job.py: pid" in (tmp_path / "worker.log").read_text()


def test_a_job_ends_as_its_own_process_would(worker, tmp_path):
    """An uncaught exception: its traceback from the script's frame, status 1; sys.exit with a
    message: the message, status 1, and what the script wrote unflushed still written."""
    for args in (("raise",), ("say",)):
        cold = run_job(tmp_path, *args, **{warm.ENV: "0"})
        warmed = run_job(tmp_path, *args)
        assert (warmed.returncode, warmed.stdout, warmed.stderr) == (cold.returncode, cold.stdout, cold.stderr)
        assert warmed.returncode == 1
    assert "job.py\", line" in warmed.stderr or "a message" in warmed.stderr
    assert (tmp_path / "worker.log").read_text().count("job job.py: pid") == 2  # the two warm ones ran there


def test_a_job_whose_libraries_would_load_differently_runs_in_its_own_process(worker, tmp_path):
    proc = run_job(tmp_path, "0", OMP_NUM_THREADS="2")
    assert proc.returncode == 0 and json.loads(proc.stdout)["ppid"] == os.getpid()
    assert "refused job.py: its environment differs in OMP_NUM_THREADS" in (tmp_path / "worker.log").read_text()


def test_without_a_worker_the_job_runs_in_its_own_process(tmp_path):
    for socket_path in ("0", str(tmp_path / "no-socket")):
        proc = run_job(tmp_path, "0", **{warm.ENV: socket_path})
        assert proc.returncode == 0 and json.loads(proc.stdout)["ppid"] == os.getpid()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # reaped between the open and the read
        return False


def _wait_gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def _sleeping_job(tmp_path: Path) -> tuple[subprocess.Popen, int]:
    script = tmp_path / "job.py"
    script.write_text(JOB)
    proc = subprocess.Popen([sys.executable, str(script), "sleep"], stdout=subprocess.PIPE, text=True,
                            env=environment())
    return proc, int(proc.stdout.readline())


def test_signals_reach_the_job_and_its_status_is_the_jobs(worker, tmp_path):
    proc, child = _sleeping_job(tmp_path)
    assert child != proc.pid  # the script runs in the worker's child
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == -signal.SIGTERM and _wait_gone(child)
    proc, child = _sleeping_job(tmp_path)
    proc.send_signal(signal.SIGINT)  # KeyboardInterrupt in the job, as in its own process
    assert proc.wait(10) != 0 and _wait_gone(child)


def test_a_child_killed_by_a_signal_ends_the_job_by_that_signal(worker, tmp_path):
    """SIGKILL of the job's child (what the out-of-memory killer sends) ends the job as SIGKILL
    would end it in its own process (Snakemake: exit 137), and says so; was an OSError from
    setting SIGKILL's handler."""
    script = tmp_path / "job.py"
    script.write_text(JOB)
    proc = subprocess.Popen([sys.executable, str(script), "sleep"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=environment())
    child = int(proc.stdout.readline())
    os.kill(child, signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL
    assert "killed by signal 9 (SIGKILL)" in proc.stderr.read()


def test_a_job_killed_outright_takes_its_child_with_it(worker, tmp_path):
    proc, child = _sleeping_job(tmp_path)
    proc.kill()
    proc.wait()
    assert _wait_gone(child)


def test_the_worker_ends_with_the_workflow_and_takes_its_jobs_along(tmp_path):
    code = (f"import sys, time; sys.path[:0] = {sys.path!r}\n"
            "from subaudit.pipeline import warm\n"
            f"w = warm.start(['json'], log={str(tmp_path / 'worker.log')!r})\n"
            "print(w.process.pid, w.socket_path, flush=True); time.sleep(60)\n")
    workflow = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=environment())
    pid, socket_path = workflow.stdout.readline().split()
    while "ready" not in (tmp_path / "worker.log").read_text():
        time.sleep(0.05)
    script = tmp_path / "job.py"
    script.write_text(JOB)
    job = subprocess.Popen([sys.executable, str(script), "sleep"], stdout=subprocess.PIPE, text=True,
                           env=environment(**{warm.ENV: socket_path}))
    child = int(job.stdout.readline())
    workflow.kill()  # the workflow ends without stopping the worker (SIGKILL)
    workflow.wait()
    assert _wait_gone(int(pid)) and _wait_gone(child)
    assert job.wait(10) != 0
    assert not Path(socket_path).parent.exists()
    assert "the workflow ended without stopping the worker" in (tmp_path / "worker.log").read_text()


def test_the_jobs_time_and_memory_reach_its_log(worker, tmp_path):
    """The child's wall and CPU time and peak memory, measured by the worker that reaped it,
    reach the job's log (its benchmark file measured the waiting process): a 0.5 s sleep and
    a 200 MB array show."""
    script = tmp_path / "job.py"
    log = tmp_path / "job.log"
    script.write_text("import __main__, types\n"
                      f"__main__.snakemake = types.SimpleNamespace(log=[{str(log)!r}])\n"
                      "from subaudit.pipeline import warm\nwarm.hand_over()\nimport time\n"
                      "big = bytearray(200 * 2**20)\nsum(range(10**6))\ntime.sleep(0.5)\n")
    proc = subprocess.run([sys.executable, str(script)], env=environment())
    assert proc.returncode == 0
    usage = warm.job_usage(log)
    assert usage is not None and usage["cpu_s"] > 0 and usage["max_rss_mb"] > 200 and usage["wall_s"] >= 0.5
    assert warm.job_usage(tmp_path / "absent.log") is None


def test_every_workflow_script_hands_over_before_its_imports(repo_root):
    for script in sorted((repo_root / "workflow" / "scripts").glob("*.py")):
        body = ast.parse(script.read_text()).body
        first = [ast.unparse(node) for node in body[1:3]]
        assert first == ["from subaudit.pipeline import warm", "warm.hand_over()"], script.name
    assert "torch" in warm.script_imports(repo_root / "workflow" / "scripts")


def test_the_worker_is_single_threaded_with_what_the_scripts_import(repo_root, tmp_path, monkeypatch):
    """Every module the scripts import, loaded as the worker loads them: no thread starts (the
    worker forks only then) and torch's generator is as a new process leaves it (seeded)."""
    code = ("import os, sys\nfrom subaudit.pipeline import warm\n"
            f"warm._load(warm.script_imports({str(repo_root / 'workflow' / 'scripts')!r}))\n"
            "assert len(os.listdir('/proc/self/task')) == 1, os.listdir('/proc/self/task')\n"
            "assert {'torch', 'scipy.stats', 'subaudit.engine'} <= set(sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment())
    assert proc.returncode == 0, proc.stderr
    assert "not preloaded" not in proc.stdout, proc.stdout


def test_it_starts_only_for_enough_jobs(monkeypatch):
    monkeypatch.delenv(warm.ENV, raising=False)
    assert warm.enabled(warm.MIN_JOBS) and not warm.enabled(warm.MIN_JOBS - 1)
    monkeypatch.setenv(warm.ENV, "0")
    assert not warm.enabled(1000)


def test_the_private_exit_hook_the_worker_relies_on_still_runs_the_exit_functions():
    """A job in the warm worker ends through ``warm._exit``, which runs the ``atexit`` functions
    by CPython's private ``atexit._run_exitfuncs`` (no public call runs them without exiting):
    an interpreter without it, or one where it no longer runs them, fails here by name."""
    code = ("import atexit, os, sys\n"
            "assert hasattr(atexit, '_run_exitfuncs'), 'atexit._run_exitfuncs is gone: warm._exit needs another way'\n"
            "atexit.register(lambda: print('exit functions ran', flush=True))\n"
            "atexit._run_exitfuncs()\n"
            "os._exit(0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "exit functions ran\n"
