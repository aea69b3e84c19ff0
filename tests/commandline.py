"""Running `python ARGS` (a script of scripts/, or -m qkvmt) as a user does, either in this Python
(run_python) or in a fresh process (start_python), with the same argv and the same result: exit
code, stdout and stderr.

A fresh Python costs seconds of imports (torch, Hydra, Lightning) before the first line of ours
runs, so a test whose subject is the command's answer, not the process, runs it here: the script's
own file executes as __main__ (scripts/<name>.py calls qkvmt.cli.main.run; -m qkvmt calls
qkvmt.cli.main.main, the `qkvmt` console script's function), its output captured at the file
descriptors, as a pipe would take it.
What a run changes in this process's global state (argv, environment, working folder, streams,
logging, Hydra, warnings, random generators, signal handlers, torch's settings) is put back, so
that runs stay independent of each other and of the other tests.
"""

import builtins
import contextlib
import io
import logging
import os
import random
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
import types
import warnings
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]


def user_environment(env: dict | None = None) -> dict:
    """This environment as a user's shell has it: no HYDRA_FULL_ERROR (which turns our one-line
    errors back into tracebacks); `env`: more variables."""
    return {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"} | (env or {})


def start_python(*argv, stdin: bytes = b"", env: dict | None = None, cwd=ROOT, timeout=300):
    """`python ARGV` in a fresh process, the clone's src/ on its path; str outputs."""
    r = subprocess.run(
        [sys.executable, *argv],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        env=user_environment(env) | {"PYTHONPATH": str(ROOT / "src")},
        timeout=timeout,
    )
    r.stdout, r.stderr = r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")
    return r


def run_python(*argv, stdin: bytes = b"", cwd=ROOT) -> subprocess.CompletedProcess:
    """`python ARGV` run in this Python, as start_python would run it: argv[0] a script's path
    (relative to `cwd`), or "-m" and a module. Arguments may be bytes, decoded as Python decodes
    its command line."""
    args = [os.fsdecode(a) for a in argv]
    code, out, err = 0, b"", b""
    with restored_state(), captured_output(stdin) as streams:
        os.environ.pop("HYDRA_FULL_ERROR", None)  # as user_environment() leaves it
        os.chdir(cwd)
        # The root logger as a fresh Python has it: no handler (pytest's are put back afterwards),
        # so that logging.basicConfig and a library's "no handler yet" checks act as they would.
        logging.getLogger().handlers.clear()
        logging.getLogger().setLevel(logging.WARNING)
        try:
            if args[0] == "-m":
                sys.argv = [args[1], *args[2:]]  # runpy puts the module's file first, as -m does
                sys.path.insert(0, os.getcwd())
                runpy.run_module(args[1], run_name="__main__", alter_sys=True)
            else:
                sys.argv = args
                run_as_main(args[0])
        except SystemExit as stop:
            code = exit_code(stop)
        except Exception as e:  # what the interpreter does with an exception nobody caught
            print_traceback(e)
            code = 1
        out, err = streams()
    return subprocess.CompletedProcess(
        ["python", *args], code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    )


def run_script(script: str, *args, stdin: bytes = b"") -> subprocess.CompletedProcess:
    """scripts/<script>.py with `args` (str or bytes), as a user runs it, in this Python."""
    return run_python(f"scripts/{script}.py", *args, stdin=stdin)


def start_script(script: str, *args, stdin: bytes = b"", env: dict | None = None) -> subprocess.CompletedProcess:
    """scripts/<script>.py with `args`, in a fresh process; `env`: more environment variables."""
    return start_python(f"scripts/{script}.py", *args, stdin=stdin, env=env)


@contextlib.contextmanager
def server_process(argv: list, cwd, env: dict, deadline_s: int = 300):
    """A server command (explore, serve) started as a user starts it: yields the process, the first
    line it prints (its address, once it listens) and a function giving its stderr so far. A server
    that never prints is killed at the deadline, so the test fails rather than hangs; one still
    running when the block ends gets Ctrl-C, as a user stops it."""
    errors = tempfile.TemporaryFile("w+")  # not a pipe: nobody reads it while the server runs
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=errors, text=True)
    deadline = threading.Timer(deadline_s, proc.kill)
    deadline.start()

    def stderr() -> str:
        errors.seek(0)
        return errors.read()[-2000:]

    try:
        yield proc, proc.stdout.readline(), stderr
    finally:
        deadline.cancel()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def user_error(r: subprocess.CompletedProcess) -> str:
    """The single `error:` line of a run a UserError stopped, which must be stderr's last line."""
    assert r.returncode == 2, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: "), r.stderr[-3000:]
    assert sum(line.startswith("error:") for line in lines) == 1
    return lines[-1]


def run_as_main(script: str) -> None:
    """The file `script` run as `python script` runs it: module __main__ with its absolute path as
    __file__ (tracebacks show its lines wherever it changes folder), its folder first on sys.path,
    sys.argv[0] as given."""
    path = os.path.abspath(script)
    main = types.ModuleType("__main__")
    main.__file__, main.__builtins__ = path, builtins
    saved = sys.modules["__main__"]
    sys.modules["__main__"] = main
    sys.path.insert(0, os.path.dirname(path))
    try:
        exec(compile(Path(path).read_bytes(), path, "exec"), main.__dict__)
    finally:
        sys.modules["__main__"] = saved


def print_traceback(e: Exception) -> None:
    """The traceback a process prints for `e`: from the script's own frame, without the frames of
    this module (and runpy's, which `python -m` would show) that ran it here."""
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_globals.get("__name__") in (__name__, "runpy"):
        tb = tb.tb_next
    traceback.print_exception(type(e), e, tb)


def exit_code(stop: SystemExit) -> int:
    """The process's exit status for sys.exit(code): None is 0, a number itself, anything else is
    printed to stderr and is 1."""
    if stop.code is None or isinstance(stop.code, int):
        return stop.code or 0
    print(stop.code, file=sys.stderr)
    return 1


@contextlib.contextmanager
def captured_output(stdin: bytes):
    """sys.stdin reads `stdin`; fds 1 and 2, and sys.stdout and sys.stderr on them (utf-8, strict
    and backslashreplace as Python sets them up for pipes), write to files: writes from native
    code land in order with Python's. Yields a function that returns (stdout, stderr) bytes.
    Stream log handlers bound to the streams in place before (a library's, made at import) write
    to the new ones meanwhile, as in a process every handler writes to its one stderr."""
    before = {1: sys.stdout, 2: sys.stderr}
    for stream in before.values():
        stream.flush()
    files = {fd: tempfile.TemporaryFile() for fd in (1, 2)}
    saved = {fd: os.dup(fd) for fd in files}
    old_stdin = sys.stdin
    moved = []
    try:
        for fd, file in files.items():
            os.dup2(file.fileno(), fd)
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", line_buffering=True
        )
        now = {1: sys.stdout, 2: sys.stderr}
        for handler in stream_handlers():
            fd = next((fd for fd, stream in before.items() if handler.stream is stream), None)
            if fd is not None:
                moved.append((handler, handler.setStream(now[fd])))

        def read():
            for stream in now.values():
                stream.flush()
            for file in files.values():
                file.seek(0)
            return files[1].read(), files[2].read()

        yield read
    finally:
        with contextlib.suppress(ValueError):  # a stream the command closed
            sys.stdout.flush()
            sys.stderr.flush()
        for handler, stream in moved:
            handler.setStream(stream)
        sys.stdin, sys.stdout, sys.stderr = old_stdin, before[1], before[2]
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        for file in files.values():
            file.close()


def stream_handlers():
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    return [
        h
        for logger in loggers
        if isinstance(logger, logging.Logger)
        for h in logger.handlers
        if type(h) is logging.StreamHandler  # not a file's, nor pytest's own capture handlers
    ]


@contextlib.contextmanager
def restored_state():
    """Everything a command may change in this process, put back as it was afterwards."""
    lists = {"argv": (sys.argv, list(sys.argv)), "path": (sys.path, list(sys.path))}  # the objects and their items
    environ, cwd = dict(os.environ), os.getcwd()
    blocked = {name for name, module in sys.modules.items() if module is None}
    loggers = logger_states()
    rng = random.getstate(), np.random.get_state(), torch.get_rng_state()
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    torch_settings = (
        torch.get_num_threads(),
        torch.are_deterministic_algorithms_enabled(),
        torch.get_float32_matmul_precision(),
        torch.get_default_dtype(),
    )
    try:
        with warnings.catch_warnings():
            # A fresh Python's warning filters, printing to stderr (pytest's record them instead).
            warnings.resetwarnings()
            for action, category, module in FRESH_FILTERS:
                warnings.filterwarnings(action, category=category, module=module, append=True)
            warnings.showwarning = warnings._showwarning_orig
            yield
    finally:
        from hydra.core.global_hydra import GlobalHydra

        GlobalHydra.instance().clear()  # Hydra clears it as a run ends; a run stopped early may not
        # An import a command blocked for its process (skip_idle_triton: sys.modules["triton"] = None).
        for name in [n for n, module in sys.modules.items() if module is None and n not in blocked]:
            del sys.modules[name]
        restore_loggers(loggers)
        for name, (items, saved) in lists.items():  # main() gives sys.argv a new list
            items[:] = saved
            setattr(sys, name, items)
        if dict(os.environ) != environ:
            os.environ.clear()
            os.environ.update(environ)
        os.chdir(cwd)
        random.setstate(rng[0])
        np.random.set_state(rng[1])
        torch.set_rng_state(rng[2])
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        threads, deterministic, precision, dtype = torch_settings
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)
        torch.set_float32_matmul_precision(precision)
        torch.set_default_dtype(dtype)


# Python's default filters, first to last (warnings.filters in a fresh `python` without -W).
FRESH_FILTERS = [
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, ""),
    ("ignore", PendingDeprecationWarning, ""),
    ("ignore", ImportWarning, ""),
    ("ignore", ResourceWarning, ""),
]


def logger_states() -> dict:
    return {
        name: (logger.level, list(logger.handlers), list(logger.filters), logger.propagate, logger.disabled)
        for name, logger in [("", logging.getLogger()), *logging.Logger.manager.loggerDict.items()]
        if isinstance(logger, logging.Logger)
    }


def restore_loggers(states: dict) -> None:
    """Loggers as they were. Handlers a run's logging configuration added are closed (a run's log
    file); a logger of ours that the run made starts over as new, while a library's made at its
    import keeps what the import set, as the library would set it again in a fresh process."""
    kept = {id(h) for state in states.values() for h in state[1]}
    for name, logger in [("", logging.getLogger()), *logging.Logger.manager.loggerDict.items()]:
        if not isinstance(logger, logging.Logger):
            continue
        if name in states:
            logger.level, handlers, filters, logger.propagate, logger.disabled = states[name]
        elif name == "qkvmt" or name.startswith("qkvmt."):
            logger.level, handlers, filters, logger.propagate, logger.disabled = logging.NOTSET, [], [], True, False
        else:
            continue
        for handler in logger.handlers:
            if id(handler) not in kept:
                handler.close()
        logger.handlers[:], logger.filters[:] = handlers, filters
    logging.Logger.manager._clear_cache()  # levels are cached per logger
