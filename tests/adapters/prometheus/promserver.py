"""A real Prometheus for tests and benchmarks, filled from OpenMetrics text by promtool.

``backfill`` turns an OpenMetrics file into TSDB blocks (``promtool tsdb create-blocks-from
openmetrics``); ``PrometheusServer`` runs ``prometheus`` on those blocks on a free loopback port and
waits for ``/-/ready``. Nothing is scraped: the minimal config has no targets, so the data the test
wrote is exactly the data that is queried.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
HAVE_PROMETHEUS = PROMETHEUS is not None and PROMTOOL is not None

_CONFIG = "global:\n  scrape_interval: 15s\nscrape_configs: []\n"


def backfill(openmetrics: Path, tsdb_dir: Path) -> None:
    """Write TSDB blocks for every sample in ``openmetrics`` into ``tsdb_dir``."""
    assert PROMTOOL is not None, "promtool is not installed"
    tsdb_dir.mkdir(parents=True, exist_ok=True)
    paths = [str(openmetrics), str(tsdb_dir)]
    # Long blocks: promtool re-reads the input once per block, so 2 h blocks over days are slow.
    subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=240h", "-q", *paths],
        check=True,
        capture_output=True,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrometheusServer:
    """``with PrometheusServer(tsdb_dir) as server: server.url`` — stop() and start() may be repeated."""

    def __init__(self, tsdb_dir: Path, *, port: int | None = None, ready_timeout: float = 60.0) -> None:
        assert PROMETHEUS is not None, "prometheus is not installed"
        self.tsdb_dir = tsdb_dir
        self.port = port or free_port()
        self.ready_timeout = ready_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._config = tsdb_dir.parent / f"{tsdb_dir.name}-prometheus.yml"
        self._log = tsdb_dir.parent / f"{tsdb_dir.name}-prometheus.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The running server's process id (benchmarks read its CPU time), None while stopped."""
        return None if self._process is None else self._process.pid

    def start(self) -> None:
        self._config.write_text(_CONFIG)
        with self._log.open("ab") as log:
            self._process = subprocess.Popen(
                [
                    str(PROMETHEUS),
                    f"--storage.tsdb.path={self.tsdb_dir}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    f"--config.file={self._config}",
                    "--storage.tsdb.retention.time=100y",
                    "--web.enable-lifecycle",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self._log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"prometheus not ready after {self.ready_timeout}s")

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None

    def __enter__(self) -> PrometheusServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
