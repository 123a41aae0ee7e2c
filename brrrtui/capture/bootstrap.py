"""The child's entry point: `python bootstrap.py (-m MODULE | SCRIPT) [ARGS...]`, started by the recorder.

It makes the script see what `python SCRIPT ARGS` would show it — sys.argv, __name__ == "__main__", the
script's directory first on sys.path, the same cwd and environment (less brrrtui's own variables) — installs
the capture agent, runs the script with runpy, and exits with the script's exit status and traceback.
Run by path, not with -m, so brrrtui's own folder does not end up on the script's sys.path.

Two descriptors come from the recorder: the capture channel (BRRRTUI_FD) and a signal pipe
(BRRRTUI_SIGNAL_FD), Python's signal wakeup fd here: its C-level handler writes the number of every signal the
script catches the moment it arrives, whatever Python handler the script installs. The recorder reads it to
pass a signal it received on only when the script did not get its own copy (a terminal's Ctrl-C or hang-up
reaches the whole process group), so the script sees each signal once, as without brrrtui. Both are moved to
high, close-on-exec numbers: the script's own files take the lowest free numbers, so a script that closes
every descriptor (`os.closerange(3, ...)`) and opens files reuses theirs last; the channel checks its
descriptor before each write (channel.WatchedChannel) and says on stderr when the script closed it.
"""

import os
import signal
import sys
from collections.abc import Callable

HIGH_FD = 1000  # where brrrtui's descriptors go (below the soft RLIMIT_NOFILE, less SPARE_FDS)
SPARE_FDS = 32
UNCAUGHT = "the script ended with an uncaught "  # a Note's prefix, then the type (record/lifecycle.py)


def _strip_own_frames(tb):  # noqa: ANN001, ANN202
    """Drop the traceback entries of bootstrap and runpy, so the script's traceback reads as without us."""
    here = os.path.abspath(__file__)
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if os.path.abspath(filename) == here or filename.endswith(("runpy.py", "<frozen runpy>")):
            tb = tb.tb_next
        else:
            break
    return tb


def _print_exception(exc: BaseException) -> None:
    exc = exc.with_traceback(_strip_own_frames(exc.__traceback__))  # excepthook reads __traceback__
    sys.excepthook(type(exc), exc, exc.__traceback__)


def _run_file(path: str) -> None:
    """Execute a script as `python path` does: a fresh `__main__` module with an absolute __file__, while
    sys.argv[0] keeps the path as typed (runpy.run_path would overwrite it)."""
    import builtins
    import importlib.machinery
    import types

    abspath = os.path.abspath(path)
    with open(abspath, "rb") as f:
        source = f.read()
    main = types.ModuleType("__main__")
    main.__file__ = abspath
    main.__builtins__ = builtins  # type: ignore[attr-defined]
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", abspath)
    main.__spec__ = None
    main.__cached__ = None  # type: ignore[attr-defined]
    sys.modules["__main__"] = main  # multiprocessing's spawn and pickle look the script up here
    code = compile(source, abspath, "exec", dont_inherit=True)
    exec(code, main.__dict__)


def _runner(args: list[str]) -> Callable[[], object]:
    """Set sys.argv and sys.path[0] as `python ARGS` would; return what runs the script."""
    import runpy

    if args[0] == "-m":
        module, script_args = args[1], args[2:]
        sys.argv = [module, *script_args]  # runpy replaces argv[0] with the module's path
        sys.path[0] = os.getcwd()
        return lambda: runpy.run_module(module, run_name="__main__", alter_sys=True)
    script, script_args = args[0], args[1:]
    sys.argv = [script, *script_args]
    sys.path[0] = os.path.dirname(os.path.realpath(script))
    if os.path.isdir(script):  # a folder (or zip) with __main__.py, as python runs it
        return lambda: runpy.run_path(script, run_name="__main__")
    return lambda: _run_file(script)


def _run(run: Callable[[], object]) -> tuple[int, bool, str]:
    """Run the script as Python would: (exit status, whether a KeyboardInterrupt ended it, the type of the
    uncaught exception that ended it, or "")."""
    try:
        run()
    except SystemExit as e:
        if e.code is None:
            return 0, False, ""
        if isinstance(e.code, int):
            return e.code, False, ""
        print(e.code, file=sys.stderr)
        return 1, False, ""
    except KeyboardInterrupt as e:
        _print_exception(e)
        return 0, True, ""
    except BaseException as e:  # noqa: BLE001 - print it as Python would, then exit 1
        _print_exception(e)
        return 1, False, _type_name(e)
    return 0, False, ""


def _type_name(e: BaseException) -> str:
    """`ValueError`, `torch.OutOfMemoryError`, `mymod.Failed`: as a traceback's last line names it."""
    cls = type(e)
    module = getattr(cls, "__module__", "")
    name = getattr(cls, "__qualname__", cls.__name__)
    return name if module in ("builtins", "__main__", None, "") else f"{module}.{name}"


def _high(fd: int) -> int:
    """`fd` moved to a high, close-on-exec number (the same one where that is not possible)."""
    import fcntl
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    floor = HIGH_FD if soft == resource.RLIM_INFINITY else min(HIGH_FD, soft - SPARE_FDS)
    os.set_inheritable(fd, False)
    if floor <= fd:
        return fd
    try:
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor)
    except OSError:
        return fd
    os.close(fd)
    return high


def _report_signals(text: str | None) -> int | None:
    """Make the signal pipe Python's wakeup fd (see the module's docstring); its descriptor, or None. A
    process the script forks inherits the setting: it is dropped there, so the recorder hears the script's
    signals only."""
    if not text:
        return None

    try:
        fd = _high(int(text))
        os.set_blocking(fd, False)
        signal.set_wakeup_fd(fd, warn_on_full_buffer=False)
    except (ValueError, OSError):
        return None

    def in_forked_child() -> None:
        try:
            old = signal.set_wakeup_fd(-1)
            if old != fd:
                signal.set_wakeup_fd(old)
            else:
                os.close(fd)
        except (ValueError, OSError):
            pass

    os.register_at_fork(after_in_child=in_forked_child)
    return fd


def _quiet_signal_pipe(fd: int | None) -> None:
    """The script closed the signal pipe too: Python would print an error for every signal it catches from
    then on ("Exception ignored when trying to write to the signal wakeup fd"). Off where possible (the main
    thread); elsewhere, a number left closed points at /dev/null instead."""
    if fd is None:
        return

    try:
        old = signal.set_wakeup_fd(-1)
        if old != fd:
            signal.set_wakeup_fd(old)
        return
    except ValueError:  # not the main thread
        pass
    try:
        os.fstat(fd)
    except OSError:
        null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        if null != fd:
            os.dup2(null, fd, inheritable=False)
            os.close(null)


def _say(text: str) -> None:
    try:
        os.write(2, f"brrrtui: {text}\n".encode("utf-8", "replace"))
    except OSError:
        pass


def _exit(code: int, interrupted: bool) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    if interrupted:  # exit "killed by SIGINT", as Python does after an uncaught KeyboardInterrupt
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    sys.exit(code)


def _flush_on_sigterm(flush: Callable[[], None]) -> None:
    """On SIGTERM, send the step times not sent yet, then die of SIGTERM as the script would have. Only
    where SIGTERM has its default action: a script that installs its own handler replaces this one (and then
    ends through the normal path, which sends them anyway)."""

    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_sigterm(signum: int, frame: object) -> None:
        try:
            flush()
        except Exception:  # noqa: BLE001 - dying of SIGTERM matters more than the last steps
            pass
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)


def main() -> None:
    signal_fd = _report_signals(os.environ.pop("BRRRTUI_SIGNAL_FD", None))  # first: a Ctrl-C may come early
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, root)
    try:
        from brrrtui.capture.agent import Agent
        from brrrtui.capture.channel import WatchedChannel
        from brrrtui.contract import userfiles
        from brrrtui.contract.config import WindowConfig
        from brrrtui.contract.messages import Bye, Hello, Note
    finally:
        sys.path.remove(root)

    # Tear CUPTI down after each window. Without it CUPTI's callbacks stay on every kernel launch after the
    # first profiler session and slow the whole run (pytorch/pytorch#144455); torch.compile's CUDA-graph mode
    # sets it to "0" itself where teardown is unsafe. A user's own setting wins.
    os.environ.setdefault("TEARDOWN_CUPTI", "1")
    # Kineto logs each profiler start and stop on stderr at its "USDT" level (torch 2.13's CPU build), which
    # would land between the script's own lines at every window; 6 is above every Kineto level. brrrtui says
    # what went wrong in its own words. A user's own setting wins.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    fd = _high(int(os.environ.pop("BRRRTUI_FD")))  # the script's own subprocesses must not hold the pipe open
    config = WindowConfig.from_json(os.environ.pop("BRRRTUI_CONFIG", None))
    calibrate = os.environ.pop("BRRRTUI_CALIBRATE", "1") == "1"

    def lost(how: str) -> None:
        agent.sched.disabled = True  # no window opens that could not be sent
        _quiet_signal_pipe(signal_fd)
        _say(
            f"the script {how} brrrtui's capture channel (descriptor {fd}): nothing it does from here on is "
            "recorded; the script runs on"
        )

    channel = WatchedChannel(fd, lost)
    agent = Agent(channel, config, userfiles.is_user_file, calibrate=calibrate)
    run = _runner(sys.argv[1:])
    agent.install()
    _flush_on_sigterm(agent.flush_on_signal)
    channel.send(Hello(pid=os.getpid(), python_version=sys.version.split()[0]))
    code, interrupted, uncaught = 0, False, ""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # start() blocked it: the script's from here
    try:
        code, interrupted, uncaught = _run(run)
    finally:
        agent.finish()
        if uncaught:
            channel.send(Note(UNCAUGHT + uncaught))
        channel.send(Bye(exit_code=code))
    _exit(code, interrupted)


def start() -> None:
    """main(), where a Ctrl-C outside the script (brrrtui's own set-up and teardown) ends the process as an
    uncaught KeyboardInterrupt ends Python, by SIGINT, without a traceback through brrrtui's code. SIGINT is
    blocked until the script runs: a KeyboardInterrupt inside an import of the set-up can come out as another
    error (numpy's C extension turns it into an ImportError); held, it is delivered once the set-up is done,
    and pending meanwhile, the recorder sees the script got its copy."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        main()
    except KeyboardInterrupt:
        _exit(130, True)


if __name__ == "__main__":
    start()
