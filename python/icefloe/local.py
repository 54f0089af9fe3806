"""``LocalCluster``: a head and data nodes as processes on loopback."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from ._bin import bin_path
from ._process import ServerProcess
from .errors import Timeout


def make_self_signed_cert(directory: Path) -> tuple[Path, Path]:
    """A throwaway certificate for localhost/127.0.0.1 (openssl CLI)."""
    cert, key = directory / "tls.crt", directory / "tls.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )
    key.chmod(0o600)
    return cert, key


class LocalCluster:
    """Starts a head and ``num_nodes`` data nodes on 127.0.0.1 with free ports.

    Use it as a context manager: it waits until every node has registered with
    the head (no sleeps, bounded by ``ready_timeout_s``) and shuts everything
    down on exit, also when the body raised.

    Every cluster has a cluster secret (``cluster_secret``; a fresh random one
    unless given): the head signs tickets and its node actions with it, and
    the nodes accept node actions only signed. ``token`` turns on client authentication (every call
    needs it); ``tls=True`` serves grpc+tls with a self-signed certificate
    (``tls_root_certs`` is its PEM path). ``env`` adds environment variables
    for the servers (e.g. S3 endpoint settings). The nodes share their
    memory with readers on this host (``--share-memory``; readers map the
    rows instead of streaming them) unless ``share_memory=False``.
    ``disk_limit`` (e.g. ``"2GiB"``) gives each node a disk tier of that size
    (``--disk-dir``, ``--disk-limit``) in a directory of the cluster's own,
    removed on stop: rows a load cannot keep within ``memory_limit`` are
    written there and served memory-mapped.
    """

    def __init__(
        self,
        num_nodes: int = 3,
        memory_limit: str | None = "4GiB",
        token: str | None = None,
        tls: bool = False,
        *,
        env: dict[str, str] | None = None,
        cluster_secret: str | None = None,
        node_args: list[list[str]] | None = None,
        head_args: list[str] | None = None,
        log_dir: str | Path | None = None,
        keep_logs: bool = False,
        ready_timeout_s: float = 60.0,
        share_memory: bool = True,
        disk_limit: str | None = None,
    ) -> None:
        if num_nodes < 1:
            raise ValueError("num_nodes must be at least 1")
        self.num_nodes = num_nodes
        self.memory_limit = memory_limit
        self.share_memory = share_memory
        self.disk_limit = disk_limit
        self._tier_dir = Path(tempfile.mkdtemp(prefix="icefloe-tier-")) if disk_limit else None
        self.token = token
        self.tls = tls
        self._env = {**os.environ, **(env or {})}
        self._env.pop("ICEFLOE_TOKEN", None)
        # The servers shut down if this process dies without stopping them.
        self._env["ICEFLOE_PARENT_PID"] = str(os.getpid())
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
        self.tls_root_certs: Path | None = None
        if cluster_secret is not None and not cluster_secret.strip():
            raise ValueError("cluster_secret must not be empty")
        self.cluster_secret: str = cluster_secret or ""
        self._security_args: list[str] = []

    # -- addresses ------------------------------------------------------------

    @property
    def head_uri(self) -> str:
        if self.head is None:
            raise RuntimeError("cluster is not running")
        return self.head.location

    @property
    def node_uris(self) -> list[str]:
        return [n.location for n in self.nodes]

    def client(self, **kwargs):
        """An :class:`icefloe.Client` of this cluster (token and TLS filled in)."""
        from .client import Client

        return Client(self.head_uri, token=self.token, tls_root_certs=self.tls_root_certs,
                      **kwargs)

    # -- lifecycle ------------------------------------------------------------

    def _prepare_security(self) -> None:
        secrets_dir = self.log_dir / "secrets"
        secrets_dir.mkdir(parents=True, exist_ok=True)
        secrets_dir.chmod(0o700)
        if not self.cluster_secret:
            self.cluster_secret = secrets.token_hex(32)
        secret_file = secrets_dir / "cluster-secret"
        secret_file.write_text(self.cluster_secret)
        secret_file.chmod(0o600)
        self._security_args = ["--cluster-secret-file", str(secret_file)]
        if self.token:
            token_file = secrets_dir / "token"
            token_file.write_text(self.token)
            token_file.chmod(0o600)
            self._security_args += ["--token-file", str(token_file)]
        if self.tls:
            cert, key = make_self_signed_cert(secrets_dir)
            self.tls_root_certs = cert
            self._security_args += ["--tls-cert", str(cert), "--tls-key", str(key),
                                    "--tls-root-certs", str(cert)]

    def _start_node(self, i: int, port: int = 0) -> ServerProcess:
        argv = [bin_path("icefloe-node"), "--host", "127.0.0.1", "--port", str(port),
                "--head", self.head_uri, *self._security_args]
        if self.memory_limit:
            argv += ["--memory-limit", str(self.memory_limit)]
        if self.share_memory:
            argv.append("--share-memory")
        if self._tier_dir is not None:
            argv += ["--disk-dir", str(self._tier_dir / f"node-{i}"),
                     "--disk-limit", str(self.disk_limit)]
        node = ServerProcess(name=f"node-{i}", argv=argv + self._node_args[i],
                             log_path=self.log_dir / f"node-{i}.log", env=self._env)
        return node.start(self._timeout_s)

    def start(self) -> LocalCluster:
        try:
            self._prepare_security()
            # A new cluster has no catalog on its nodes to recover: serve at once.
            recover = [] if any(a.startswith("--recover-ms") for a in self._head_args) else [
                "--recover-ms", "0"]
            self.head = self._start_head("0", recover)
            for i in range(self.num_nodes):
                self.nodes.append(self._start_node(i))
            self.wait_for_nodes()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_head(self, port: str, extra: list[str]) -> ServerProcess:
        argv = [bin_path("icefloe-head"), "--host", "127.0.0.1", "--port", port,
                *self._security_args, *extra, *self._head_args]
        return ServerProcess(name="head", argv=argv, log_path=self.log_dir / "head.log",
                             env=self._env).start(self._timeout_s)

    def kill_head(self) -> None:
        """Kills the head at once (SIGKILL), as a crash would; the nodes keep serving."""
        if self.head is not None:
            self.head.kill()

    def restart_head(self, wait: bool = True) -> None:
        """Starts the head again on the same port with the same secret and token.

        The nodes re-register and the new head adopts the datasets they hold
        (its default ``--recover-ms`` wait). With ``wait``, returns once every
        running node is alive again and the head has recovered its catalog.
        """
        if self.head is None:
            raise RuntimeError("cluster is not running")
        port = self.head.location.rsplit(":", 1)[1]
        self.head.stop()
        self.head = self._start_head(port, [])
        if wait:
            self.wait_for_nodes()
            deadline = time.monotonic() + self._timeout_s
            with self.client() as client:
                while client.status().get("recovering"):
                    if time.monotonic() > deadline:
                        raise Timeout(f"the head did not recover its catalog; logs:\n{self.logs()}")
                    time.sleep(0.05)

    def wait_for_nodes(self, timeout_s: float | None = None) -> None:
        """Waits until the head sees every running node alive."""
        deadline = time.monotonic() + (timeout_s or self._timeout_s)
        with self.client() as client:
            while True:
                status = client.status()
                alive = {n["location"] for n in status["nodes"] if n["state"] == "alive"}
                wanted = {n.location for n in self.nodes if n.alive()}
                if wanted <= alive:
                    return
                if time.monotonic() > deadline:
                    raise Timeout(f"nodes {sorted(wanted - alive)} did not register; "
                                  f"logs:\n{self.logs()}")
                time.sleep(0.05)

    def kill_node(self, i: int) -> None:
        """Kills data node ``i`` at once (SIGKILL), as a crash would."""
        self.nodes[i].kill()

    def restart_node(self, i: int, same_port: bool = False) -> None:
        """Starts data node ``i`` again: a new process, on a new port, or with
        ``same_port=True`` on its old one (a pod replaced at the same address).
        It starts empty, but for what it can prove of its disk tier's files."""
        port = int(self.nodes[i].location.rsplit(":", 1)[1]) if same_port else 0
        self.nodes[i].stop()
        self.nodes[i] = self._start_node(i, port)
        self.wait_for_nodes()

    def stop(self) -> None:
        for proc in ([self.head] if self.head else []) + self.nodes:
            proc.stop()
        if self._own_log_dir and not self._keep_logs:
            shutil.rmtree(self.log_dir, ignore_errors=True)
        if self._tier_dir is not None:
            shutil.rmtree(self._tier_dir, ignore_errors=True)

    def logs(self) -> str:
        """The tail of every server's log, for test failure messages."""
        procs = ([self.head] if self.head else []) + self.nodes
        return "\n".join(f"--- {p.name} ---\n{p.tail()}" for p in procs)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
