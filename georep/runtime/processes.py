"""Starting and killing georep processes: used by the demo, benchmarks and tests; and
the two things every georep server process does the same way (:func:`exit_on_invariant`,
:func:`serve_until_signalled`).

A georep server process prints one line ``<NAME>_READY <detail>`` on stdout once it
serves (for a bookie the detail is its ``host:port``). :class:`ManagedProcess` waits for
that line, keeps draining stdout afterwards so the child never blocks on a full pipe,
and sends stderr to a log file.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from georep.invariant import InvariantViolation, present
from georep.runtime.awaiting import within

log = logging.getLogger(__name__)

#: Exit status of a server that stopped on a broken invariant (EX_SOFTWARE).
EXIT_INVARIANT = 70


def exit_on_invariant(loop: asyncio.AbstractEventLoop) -> None:
    """A broken invariant anywhere in ``loop`` is a bug: the process stops at once
    rather than serve from state it no longer trusts."""

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exception = context.get("exception")
        if isinstance(exception, InvariantViolation):
            log.critical("invariant violated: %s", context.get("message"), exc_info=exception)
            logging.shutdown()
            os._exit(EXIT_INVARIANT)
        loop.default_exception_handler(context)

    loop.set_exception_handler(handle)


async def serve_until_signalled(ready_line: str) -> None:
    """Print the ``<NAME>_READY ...`` line the parent waits for, then return on SIGTERM
    or SIGINT."""
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    print(ready_line, flush=True)
    await stopping.wait()
    log.info("signal received; stopping")


class ProcessFailed(RuntimeError):
    """A child exited or stayed silent before announcing it was ready."""


class ManagedProcess:
    def __init__(
        self,
        args: Sequence[str],
        ready_prefix: str,
        *,
        log_path: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.args = list(args)
        self.ready_prefix = ready_prefix
        self.log_path = log_path
        self.env = env
        self.process: asyncio.subprocess.Process | None = None
        self.detail = ""
        self._drain: asyncio.Task[None] | None = None
        self._log: BinaryIO | None = None

    @property
    def pid(self) -> int:
        return self.process.pid if self.process else -1

    @property
    def returncode(self) -> int | None:
        """The exit code once the process has exited; None while it runs."""
        return None if self.process is None else self.process.returncode

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def start(self, timeout_s: float = 60.0) -> str:
        stderr: int | BinaryIO = asyncio.subprocess.DEVNULL
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            log_file = open(self.log_path, "ab")  # noqa: ASYNC230 - closed in wait(); a local file
            self._log = stderr = log_file
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(self.env or {})}
        self.process = await asyncio.create_subprocess_exec(
            *self.args, stdout=asyncio.subprocess.PIPE, stderr=stderr, env=env
        )
        try:
            self.detail = await within(self._await_ready(), timeout_s)
        except (TimeoutError, ProcessFailed) as error:
            self.kill()
            await self.wait()
            raise ProcessFailed(
                f"{self.args[3:5]} did not start: {error}; see {self.log_path}"
            ) from None
        self._drain = asyncio.create_task(self._drain_stdout())
        return self.detail

    async def _await_ready(self) -> str:
        process = present(self.process, "waiting on a process never started")
        stdout = present(process.stdout, "a process started with its stdout piped")
        while True:
            line = await stdout.readline()
            if not line:
                raise ProcessFailed(f"exited with {await process.wait()}")
            text = line.decode(errors="replace").strip()
            if text.startswith(self.ready_prefix):
                return text[len(self.ready_prefix) :].strip()

    async def _drain_stdout(self) -> None:
        with contextlib.suppress(Exception):
            stdout = present(self.process, "draining a process never started").stdout
            while await present(stdout, "a process started with its stdout piped").read(65536):
                pass

    def kill(self) -> None:
        """SIGKILL: no shutdown path runs."""
        if self.process is not None and self.running:
            self.process.send_signal(signal.SIGKILL)

    async def terminate(self, timeout_s: float = 10.0) -> int:
        if self.process is not None and self.running:
            self.process.send_signal(signal.SIGTERM)
            try:
                return await within(self.wait(), timeout_s)
            except TimeoutError:
                self.kill()
        return await self.wait()

    async def wait(self) -> int:
        code = await self.process.wait() if self.process else 0
        if self._drain is not None:
            await self._drain
            self._drain = None
        if self._log is not None:
            self._log.close()
            self._log = None
        return code


def georep_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "georep", *args]


async def start_bookie(
    data_dir: Path,
    *,
    port: int = 0,
    metadata_url: str | None = None,
    extra: Sequence[str] = (),
    log_path: Path | None = None,
) -> ManagedProcess:
    """A bookie subprocess; its ``detail`` is the ``host:port`` it serves on."""
    args = ["bookie", "--dir", str(data_dir), "--port", str(port)]
    if metadata_url:
        args += ["--metadata", metadata_url]
    process = ManagedProcess(
        georep_command(*args, *extra),
        "BOOKIE_READY",
        log_path=log_path or data_dir.parent / f"{data_dir.name}.log",
    )
    await process.start()
    return process
