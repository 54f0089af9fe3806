"""Starting icefloe servers as child processes and waiting for readiness.

A server prints one line on stdout when it listens:
``<component> ready location=grpc://HOST:PORT health=http://HOST:PORT``.
We wait for that line (never a fixed sleep), bounded by a deadline, and keep
each server's stderr log in a file so failures can be diagnosed.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import Timeout, Unavailable

_READY = re.compile(r"^(?P<component>\S+) ready location=(?P<location>\S+) health=(?P<health>\S+)")


@dataclass
class ServerProcess:
    """A running icefloe server."""

    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] | None = None
    popen: subprocess.Popen | None = None
    location: str = ""
    health: str = ""
    _log: object = field(default=None, repr=False)

    def start(self, timeout_s: float = 30.0) -> ServerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(
            self.argv,
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
            env=self.env,
            start_new_session=True,  # Ctrl-C in a terminal reaches us, not the children.
        )
        self._wait_ready(timeout_s)
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        assert self.popen is not None and self.popen.stdout is not None
        deadline = time.monotonic() + timeout_s
        sel = selectors.DefaultSelector()
        sel.register(self.popen.stdout, selectors.EVENT_READ)
        buf = b""
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.stop()
                    raise Timeout(
                        f"{self.name} not ready after {timeout_s:.0f}s; log: {self.tail()}"
                    )
                if not sel.select(timeout=min(remaining, 0.5)):
                    if self.popen.poll() is not None:
                        break
                    continue
                chunk = os.read(self.popen.stdout.fileno(), 4096)
                if not chunk:
                    break
                buf += chunk
                for line in buf.decode(errors="replace").splitlines():
                    m = _READY.match(line)
                    if m:
                        self.location = m.group("location")
                        self.health = m.group("health")
                        return
        finally:
            sel.close()
        code = self.popen.wait(timeout=5)
        self.stop()
        raise Unavailable(f"{self.name} exited with code {code} before it was ready: {self.tail()}")

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def kill(self) -> None:
        """Kills the process at once (SIGKILL), as a crash would."""
        if self.alive():
            assert self.popen is not None
            self.popen.kill()
            self.popen.wait(timeout=10)
        self._close()

    def stop(self, timeout_s: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout_s`. Returns the exit code."""
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)
        self._close()
        return self.popen.returncode

    def _close(self) -> None:
        if self.popen is not None and self.popen.stdout is not None:
            self.popen.stdout.close()
        if self._log is not None:
            self._log.close()  # type: ignore[attr-defined]
            self._log = None
