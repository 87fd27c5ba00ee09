"""A georep server stops (exit 70) on a broken invariant anywhere in its event loop,
and serves until SIGTERM otherwise."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from georep.invariant import invariant
    from georep.runtime.processes import exit_on_invariant, serve_until_signalled

    async def main():
        exit_on_invariant(asyncio.get_running_loop())
        if sys.argv[1] == "break":
            asyncio.get_running_loop().call_soon(invariant, False, "broken on purpose")
        await serve_until_signalled("TEST_READY")
        return 0

    sys.exit(asyncio.run(main()))
    """
)


def start(mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", SCRIPT, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_broken_invariant_stops_the_process_with_70():
    process = start("break")
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 70
    assert "invariant violated: " in stderr and "broken on purpose" in stderr


def test_sigterm_ends_serving_cleanly():
    process = start("serve")
    assert process.stdout is not None
    try:
        assert process.stdout.readline().strip() == "TEST_READY"
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        process.kill()  # nothing once it has exited
        process.communicate()  # and its pipes closed
