"""The child's entry point: `python bootstrap.py (-m MODULE | SCRIPT) [ARGS...]`, started by the recorder.

It makes the script see what `python SCRIPT ARGS` would show it — sys.argv, __name__ == "__main__", the
script's directory first on sys.path, the same cwd and environment (less brrrtui's own variables) — installs
the capture agent, runs the script with runpy, and exits with the script's exit status and traceback.
Run by path, not with -m, so brrrtui's own folder does not end up on the script's sys.path.
"""

import os
import sys
from collections.abc import Callable


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


def _run(run: Callable[[], object]) -> tuple[int, bool]:
    """Run the script as Python would: (exit status, whether a KeyboardInterrupt ended it)."""
    try:
        run()
    except SystemExit as e:
        if e.code is None:
            return 0, False
        if isinstance(e.code, int):
            return e.code, False
        print(e.code, file=sys.stderr)
        return 1, False
    except KeyboardInterrupt as e:
        _print_exception(e)
        return 0, True
    except BaseException as e:  # noqa: BLE001 - print it as Python would, then exit 1
        _print_exception(e)
        return 1, False
    return 0, False


def _exit(code: int, interrupted: bool) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    if interrupted:  # exit "killed by SIGINT", as Python does after an uncaught KeyboardInterrupt
        import signal

        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    sys.exit(code)


def _flush_on_sigterm(flush: Callable[[], None]) -> None:
    """On SIGTERM, send the step times not sent yet, then die of SIGTERM as the script would have. Only
    where SIGTERM has its default action: a script that installs its own handler replaces this one (and then
    ends through the normal path, which sends them anyway)."""
    import signal

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
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, root)
    try:
        from brrrtui.capture.agent import Agent
        from brrrtui.contract import userfiles
        from brrrtui.contract.config import WindowConfig
        from brrrtui.contract.messages import Bye, Hello
        from brrrtui.contract.protocol import Channel
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
    fd = int(os.environ.pop("BRRRTUI_FD"))
    os.set_inheritable(fd, False)  # the script's own subprocesses must not hold the pipe open
    config = WindowConfig.from_json(os.environ.pop("BRRRTUI_CONFIG", None))
    calibrate = os.environ.pop("BRRRTUI_CALIBRATE", "1") == "1"
    channel = Channel(fd)
    agent = Agent(channel, config, userfiles.is_user_file, calibrate=calibrate)
    run = _runner(sys.argv[1:])
    agent.install()
    _flush_on_sigterm(agent.flush_on_signal)
    channel.send(Hello(pid=os.getpid(), python_version=sys.version.split()[0]))
    code, interrupted = 0, False
    try:
        code, interrupted = _run(run)
    finally:
        agent.finish()
        channel.send(Bye(exit_code=code))
    _exit(code, interrupted)


if __name__ == "__main__":
    main()
