"""``LocalCluster``: a head and data nodes as processes on loopback."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ._bin import bin_path
from ._process import ServerProcess


class LocalCluster:
    """Starts a head and ``num_nodes`` data nodes on 127.0.0.1 with free ports.

    Use it as a context manager; everything is shut down on exit, also when the
    body raised. Server logs go to ``log_dir`` (a temporary directory by
    default, removed on exit unless ``keep_logs``).
    """

    def __init__(
        self,
        num_nodes: int = 3,
        *,
        node_args: list[list[str]] | None = None,
        head_args: list[str] | None = None,
        log_dir: str | Path | None = None,
        keep_logs: bool = False,
        ready_timeout_s: float = 60.0,
    ) -> None:
        if num_nodes < 1:
            raise ValueError("num_nodes must be at least 1")
        self.num_nodes = num_nodes
        self._node_args = node_args or [[] for _ in range(num_nodes)]
        if len(self._node_args) != num_nodes:
            raise ValueError("node_args needs one list per node")
        self._head_args = head_args or []
        self._own_log_dir = log_dir is None
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="icefloe-"))
        self._keep_logs = keep_logs
        self._timeout_s = ready_timeout_s
        self.nodes: list[ServerProcess] = []
        self.head: ServerProcess | None = None

    @property
    def head_uri(self) -> str:
        if self.head is None:
            raise RuntimeError("cluster is not running")
        return self.head.location

    @property
    def node_uris(self) -> list[str]:
        return [n.location for n in self.nodes]

    def start(self) -> LocalCluster:
        try:
            for i in range(self.num_nodes):
                node = ServerProcess(
                    name=f"node-{i}",
                    argv=[
                        bin_path("icefloe-node"),
                        "--host",
                        "127.0.0.1",
                        "--port",
                        "0",
                        *self._node_args[i],
                    ],
                    log_path=self.log_dir / f"node-{i}.log",
                )
                self.nodes.append(node.start(self._timeout_s))
            head_argv = [bin_path("icefloe-head"), "--host", "127.0.0.1", "--port", "0"]
            for node in self.nodes:
                head_argv += ["--node", node.location]
            self.head = ServerProcess(
                name="head", argv=head_argv + self._head_args, log_path=self.log_dir / "head.log"
            ).start(self._timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for proc in ([self.head] if self.head else []) + self.nodes:
            proc.stop()
        if self._own_log_dir and not self._keep_logs:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def logs(self) -> str:
        """The tail of every server's log, for test failure messages."""
        procs = ([self.head] if self.head else []) + self.nodes
        return "\n".join(f"--- {p.name} ---\n{p.tail()}" for p in procs)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
