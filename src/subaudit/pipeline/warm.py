"""The warm worker: a local workflow's jobs start without importing torch again.

Every job of the default run is a fresh Python process that imports torch, scipy and subaudit
before it computes: 1.3 to 3.6 s of a job that often computes for 3 to 10 s.  A Snakemake run
with local jobs to run (``onstart``, in the ``Snakefile``: every job of a local run, the local
rules of a SLURM one) starts one worker process that imports the
modules the workflow's scripts import, once, and then waits on a Unix socket in a private
directory.  Each job's script begins with :func:`hand_over`: the job's process sends the worker
its script, arguments, working directory, environment and standard streams; the worker forks a
child that runs the script exactly as ``python script`` would (the child adopts all of them),
and the job's process waits for the child, forwards signals to it and exits with its status.

Nothing changes in what a job computes (the default run's outputs are byte for byte those of
cold jobs, ``dvc.lock`` unchanged; ``tests/workflow/test_workflow.py`` reruns jobs of the tiny
run in their own processes and compares bytes).  The worker refuses a job, which then runs in
its own process as before, where it cannot promise that: an environment that differs from the
worker's in anything but :data:`ADOPTED` (a job with more threads: ``OMP_NUM_THREADS``, which
libraries read as they load), a worker that is not single-threaded at the fork, or no
worker at all (``SUBAUDIT_WARM_WORKER=0``, a dry run, fewer than :data:`MIN_JOBS` local jobs
to run).  Jobs a cluster runs never use it: on another node the socket is not there, and on the
worker's own node their environment differs (the scheduler's variables), so they are refused.
The child starts from the state a new process has: the global generators of Python, NumPy and
torch seeded from the operating system (as each new process seeds them: no job's numbers
depend on them), its own standard streams.  It ends as
the interpreter would for what a job can observe, without tearing down the worker's modules.

What a job's ``benchmark:`` file then measures: its wall time, as before; its CPU and memory
columns are those of the waiting process, so that process appends the child's CPU time and
peak memory to the job's log (one ``warm worker:`` line, which the docs' job table reads).

May import: nothing of subaudit (a job's process imports this module first, and only this).
"""

from __future__ import annotations

import ast
import atexit
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

ENV = "SUBAUDIT_WARM_WORKER"
"""The worker's socket, for the jobs (set by :func:`start`); ``0`` turns the worker off."""

MIN_JOBS = 8
"""Fewer jobs to run than this and no worker starts: its imports (about 5 s of one core) would
cost more than the jobs save (about 1.3 s each)."""

ADOPTED = frozenset({"TMPDIR", "TMP", "TEMP", "TEMPDIR", "PWD", "OLDPWD", "SHLVL", "_"})
"""Environment variables a job may set differently from the worker (Snakemake's ``tmpdir``
resource; those the shell that starts a job sets): no library reads them while it loads.  Any
other difference and the job runs in its own process."""

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
LOG_PREFIX = "warm worker:"
_MESSAGE = 1 << 20
_IN_CHILD = False
#: When this module was imported: a job script's first import, so about when its process began.
_STARTED = time.monotonic()


# --------------------------------------------------------------------------- the job's side


def hand_over() -> None:
    """Run this job's script in a child of the warm worker and exit with its status; return
    at once (and let the script run here) where no worker takes the job.

    Call it first in a workflow script, before its imports."""
    path = os.environ.get(ENV, "")
    if _IN_CHILD:
        return
    if path in ("", "0"):
        atexit.register(_note_own_usage)
        return
    request = json.dumps({"script": os.path.abspath(sys.argv[0]), "argv": sys.argv, "cwd": os.getcwd(),
                          "env": dict(os.environ)}).encode()
    # signals wait until they can be forwarded (or, if the job stays here, take their usual course)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        conn.connect(path)
        socket.send_fds(conn, [request], [0, 1, 2])
        reply = json.loads(conn.recv(_MESSAGE) or b"{}")
    except (OSError, ValueError):
        reply = {}  # no worker listening (not started yet, or gone)
    if "pid" not in reply:  # refused (the worker's log says why), or no worker: run here
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        atexit.register(_note_own_usage)
        return
    child = int(reply["pid"])

    def forward(signum: int, _frame: Any) -> None:
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for sig in FORWARDED:
        signal.signal(sig, forward)
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    message = conn.recv(_MESSAGE)  # retried after each forwarded signal (PEP 475)
    if not message:  # the worker ended first: the child must not outlive this job
        forward(signal.SIGKILL, None)
        print(f"{LOG_PREFIX} the worker ended before the job did; rerun the workflow", file=sys.stderr)
        os._exit(1)
    result = json.loads(message)
    _note_in_job_log(result)
    returncode = int(result["returncode"])
    sys.stdout.flush()
    sys.stderr.flush()
    if returncode < 0:  # killed by a signal: end the same way, so Snakemake reports the same
        signum = -returncode
        print(f"{LOG_PREFIX} the job was killed by signal {signum} ({signal.Signals(signum).name})",
              file=sys.stderr, flush=True)
        if signum not in (signal.SIGKILL, signal.SIGSTOP):  # their disposition cannot be set
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
        os.kill(os.getpid(), signum)
    os._exit(returncode)


def _note_own_usage() -> None:
    """At the exit of a job that ran in its own process: its wall and CPU time and peak memory
    (its own or its largest child's) in its log, as for a job the worker ran."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    _note_in_job_log({"pid": os.getpid(), "wall_s": time.monotonic() - _STARTED,
                      "cpu_s": sum(u.ru_utime + u.ru_stime for u in (own, children)),
                      "max_rss_mb": max(own.ru_maxrss, children.ru_maxrss) / 1024}, forked=False)


def _note_in_job_log(result: dict[str, Any], forked: bool = True) -> None:
    """Append the job's wall and CPU time and peak memory to its log (a job the worker ran: its
    child's, which its benchmark file, measuring this waiting process, does not see)."""
    import __main__

    job = getattr(__main__, "snakemake", None)
    log = list(getattr(job, "log", None) or [])
    if not log:
        return
    try:
        with open(log[0], "a", encoding="utf-8") as fh:
            where = "forked from the worker" if forked else "its own (the worker did not take it)"
            fh.write(f"{LOG_PREFIX} ran in process {result['pid']}, {where}: "
                     f"wall_s={result['wall_s']:.2f} cpu_s={result['cpu_s']:.2f} "
                     f"max_rss_mb={result['max_rss_mb']:.1f}\n")
    except OSError:
        pass


def job_usage(log: str | Path) -> dict[str, float] | None:
    """The wall and CPU seconds and peak memory (MB) the worker recorded in a job's log, if it
    ran there."""
    try:
        lines = Path(log).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith(LOG_PREFIX) and "cpu_s=" in line:
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            return {k: float(fields[k]) for k in ("wall_s", "cpu_s", "max_rss_mb") if k in fields}
    return None


# --------------------------------------------------------------------------- the workflow's side


def script_imports(folder: str | Path) -> list[str]:
    """Every module the scripts in ``folder`` import at their top level (what the worker loads)."""
    names: set[str] = set()
    for script in sorted(Path(folder).glob("*.py")):
        for node in ast.parse(script.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
    return sorted(names - {__name__})


@dataclass
class Worker:
    """A started worker: its process and socket; :meth:`stop` ends both."""

    process: subprocess.Popen
    socket_path: str

    def stop(self, timeout: float = 10.0) -> None:
        """End the worker (its running children get SIGTERM) and forget it in this process."""
        if os.environ.get(ENV) == self.socket_path:
            del os.environ[ENV]
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def enabled(jobs_to_run: int) -> bool:
    """Whether a run of ``jobs_to_run`` local jobs starts a worker (``SUBAUDIT_WARM_WORKER=0``: never)."""
    return os.environ.get(ENV, "") != "0" and jobs_to_run >= MIN_JOBS


PREAMBLE = ("snakemake.iocontainers", "snakemake.logging", "snakemake.io")
"""What Snakemake's preamble to every script imports (to unpickle the ``snakemake`` object)."""


def start(modules: Iterable[str], log: str | Path) -> Worker:
    """Start a worker that imports ``modules`` and then takes jobs, logging to ``log``; set
    :data:`ENV` in this process's environment, which the jobs it starts inherit.

    Returns at once: jobs that start before the worker has loaded run in their own process."""
    folder = tempfile.mkdtemp(prefix="subaudit-warm-")  # mode 0700: only this user may connect
    path = os.path.join(folder, "socket")
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env[ENV] = path
    for name in ("OMP_NUM_THREADS", "GOTO_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                 "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
        env[name] = "1"  # what Snakemake gives a one-thread job: the libraries read it as they load
    with open(log, "w", encoding="utf-8") as out:
        process = subprocess.Popen([sys.executable, "-m", __name__, "--socket", path, "--parent", str(os.getpid()),
                                    *PREAMBLE, *modules], env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    os.environ[ENV] = path
    return Worker(process, path)


# --------------------------------------------------------------------------- the worker


@dataclass
class _Job:
    script: str
    argv: list[str]
    cwd: str
    env: dict[str, str]
    fds: list[int]


class _Server:
    """The worker's loop: accept jobs, fork a child per job, report each child's end."""

    def __init__(self, path: str, parent: int) -> None:
        self.path, self.parent = path, parent
        self.env = dict(os.environ)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(path)
        self.listener.listen(64)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ, ("accept", None))
        self.running: dict[int, tuple[socket.socket, int, float]] = {}  # pid -> (conn, pidfd, start)
        self.stopping = False
        self.jobs = self.refused = 0

    def log(self, message: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)

    def serve(self) -> _Job | None:
        """Take jobs until told to stop (None) or, in a forked child, return its job."""
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches the jobs themselves
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        self.log(f"ready: pid {os.getpid()}, socket {self.path}")
        while not self.stopping:
            if os.getppid() != self.parent:
                self.log("the workflow ended without stopping the worker: stopping")
                break
            for key, _ in self.selector.select(timeout=1.0):
                kind, data = key.data
                if kind == "accept":
                    job = self.accept()
                    if job is not None:
                        return job
                elif kind == "ended":
                    self.reap(data)
                else:  # the job's process closed its end: it is gone, and so must its child be
                    self.kill(data)
        self.shutdown()
        return None

    def accept(self) -> _Job | None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return None
        conn.settimeout(10.0)
        fds: list[int] = []
        try:
            uid = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            message, fds, _, _ = socket.recv_fds(conn, _MESSAGE, 3)
            request = json.loads(message)
            reason = self.refusal(int.from_bytes(uid[4:8], sys.byteorder), request, fds)
            if reason:
                self.refused += 1
                self.log(f"refused {os.path.basename(request.get('script', '?'))}: {reason}")
                conn.send(json.dumps({"refused": reason}).encode())
                raise _Refused
            job = _Job(request["script"], list(request["argv"]), request["cwd"], dict(request["env"]), fds)
            pid = os.fork()
        except (OSError, ValueError, KeyError, _Refused):
            for fd in fds:
                os.close(fd)
            conn.close()
            return None
        if pid == 0:
            self.become_child(conn)
            return job
        for fd in fds:
            os.close(fd)
        self.jobs += 1
        pidfd = os.pidfd_open(pid)
        self.running[pid] = (conn, pidfd, time.monotonic())
        self.selector.register(pidfd, selectors.EVENT_READ, ("ended", pid))
        self.selector.register(conn, selectors.EVENT_READ, ("gone", pid))
        try:
            conn.send(json.dumps({"pid": pid}).encode())
        except OSError:
            self.kill(pid)
        self.log(f"job {os.path.basename(job.script)}: pid {pid}")
        return None

    def refusal(self, uid: int, request: dict[str, Any], fds: list[int]) -> str:
        """Why this worker cannot run the job as its own process would ('' if it can)."""
        if uid != os.getuid():
            return f"another user (uid {uid})"
        if len(fds) != 3:
            return "no standard streams"
        if len(os.listdir("/proc/self/task")) != 1:
            return "the worker is not single-threaded"
        env = request.get("env", {})
        differ = sorted(k for k in set(env) | set(self.env)
                        if k not in ADOPTED and env.get(k) != self.env.get(k))
        return f"its environment differs in {', '.join(differ)}" if differ else ""

    def become_child(self, conn: socket.socket) -> None:
        """In the forked child: drop the worker's sockets and signal handling."""
        global _IN_CHILD
        _IN_CHILD = True
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
        for _, pidfd, _ in self.running.values():
            os.close(pidfd)
        for c, _, _ in self.running.values():
            c.close()
        self.selector.close()
        self.listener.close()
        conn.close()

    def reap(self, pid: int) -> None:
        conn, pidfd, began = self.running.pop(pid)
        self.selector.unregister(pidfd)
        self.selector.unregister(conn)
        os.close(pidfd)
        _, status, usage = os.wait4(pid, 0)
        returncode = os.waitstatus_to_exitcode(status)
        result = {"pid": pid, "returncode": returncode, "cpu_s": usage.ru_utime + usage.ru_stime,
                  "max_rss_mb": usage.ru_maxrss / 1024, "wall_s": time.monotonic() - began}
        self.log(f"pid {pid} ended: {returncode} after {result['wall_s']:.1f} s "
                 f"(cpu {result['cpu_s']:.1f} s)")
        try:
            conn.send(json.dumps(result).encode())
        except OSError:
            pass
        conn.close()

    def kill(self, pid: int, sig: int = signal.SIGKILL) -> None:
        if pid not in self.running:  # reaped already: the number may be another process's now
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    def shutdown(self) -> None:
        for pid in list(self.running):
            self.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5.0
        while self.running and time.monotonic() < deadline:
            for key, _ in self.selector.select(timeout=0.2):
                if key.data[0] == "ended":
                    self.reap(key.data[1])
        for pid in list(self.running):
            self.kill(pid)
            self.reap(pid)
        self.listener.close()
        for leftover in (self.path, os.path.dirname(self.path)):
            try:
                (os.unlink if leftover == self.path else os.rmdir)(leftover)
            except OSError:
                pass
        self.log(f"stopped: {self.jobs} jobs run here, {self.refused} refused")


class _Refused(Exception):
    pass


def _load(modules: list[str]) -> None:
    """Import the modules (one that fails is left to the jobs, which report it)."""
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as error:  # noqa: BLE001 - a module that fails to import here is only not preloaded
            print(f"not preloaded: {name}: {error!r}", flush=True)


def _run_child(job: _Job) -> None:
    """In the forked child: become the job's own process, run its script as ``__main__`` and
    end as the interpreter would, less tearing down the worker's modules (0.2 s a job)."""
    import random
    import runpy

    for target, fd in enumerate(job.fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(job.cwd)
    os.environ.clear()
    os.environ.update(job.env)
    tempfile.tempdir = None  # recomputed from the job's TMPDIR
    sys.argv = job.argv
    sys.path[0] = os.path.dirname(job.script)
    sys.stdout.reconfigure(line_buffering=os.isatty(1))
    random.seed()  # the global generators, seeded from the operating system as in a new process
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    if "torch" in sys.modules:
        sys.modules["torch"].seed()
    try:
        runpy.run_path(job.script, run_name="__main__")
        code = 0
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except BaseException as error:  # noqa: BLE001 - reported as the interpreter reports it
        trace = error.__traceback__
        while trace is not None and trace.tb_frame.f_code.co_filename != job.script:
            trace = trace.tb_next  # from the script's own frame, as in its own process
        error.with_traceback(trace or error.__traceback__)
        sys.excepthook(type(error), error, error.__traceback__)
        code = -signal.SIGINT if isinstance(error, KeyboardInterrupt) else 1
    _exit(code)


def _exit_code(code: object) -> int:
    """The status ``sys.exit(code)`` ends a process with (a message is printed, as Python does)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _exit(code: int) -> None:
    """End the process as the interpreter's exit would for what a job can observe: its
    non-daemon threads joined, the ``atexit`` functions run (the log's handlers flushed and
    closed), the standard streams flushed; then ``os._exit``, skipping the teardown of every
    module, which writes nothing (the workflow's scripts close what they write)."""
    import atexit
    import threading

    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code == -signal.SIGINT:  # an uncaught KeyboardInterrupt ends the process by SIGINT
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog=f"python -m {__name__}", description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--parent", type=int, required=True, help="stop when this process is gone")
    parser.add_argument("modules", nargs="*")
    args = parser.parse_args(argv)
    began = time.monotonic()
    _load(args.modules)
    import gc

    gc.collect()
    gc.freeze()  # the modules' objects: children share their pages instead of copying them
    server = _Server(args.socket, args.parent)
    server.log(f"loaded {len(args.modules)} modules in {time.monotonic() - began:.1f} s")
    job = server.serve()
    if job is not None:
        _run_child(job)


if __name__ == "__main__":
    from subaudit.pipeline import warm  # the importable module: the jobs' hand_over reads its state

    warm.main()
