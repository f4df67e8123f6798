"""Stand-in for lightning/fabric/plugins/environments/lsf.py (commit d4a30c9).

detect(): LSB_JOBID, LSB_DJOB_RANKFILE, JSM_NAMESPACE_LOCAL_RANK and JSM_NAMESPACE_SIZE all set (jsrun).
Constructing it reads the rank file (one host per line; the first line, the launch node, is dropped): main
address = first remaining host; node rank = index of this hostname among the distinct hosts; main port =
MASTER_PORT, else LSB_JOBID % 1000 + 10000; MASTER_ADDR/MASTER_PORT are written. world_size / global_rank /
local_rank: JSM_NAMESPACE_SIZE / _RANK / _LOCAL_RANK (ValueError when missing).
"""
import logging
import os
import socket

from lightning.fabric.plugins.environments.cluster_environment import ClusterEnvironment

log = logging.getLogger(__name__)


class LSFEnvironment(ClusterEnvironment):
    """An environment for running on clusters managed by the LSF resource manager (jsrun)."""

    def __init__(self) -> None:
        super().__init__()
        self._main_address = self._get_main_address()
        self._main_port = self._get_main_port()
        self._node_rank = self._get_node_rank()
        os.environ["MASTER_ADDR"] = str(self._main_address)
        os.environ["MASTER_PORT"] = str(self._main_port)

    @property
    def creates_processes_externally(self) -> bool:
        return True

    @property
    def main_address(self) -> str:
        return self._main_address

    @property
    def main_port(self) -> int:
        return self._main_port

    @staticmethod
    def detect() -> bool:
        required = {"LSB_JOBID", "LSB_DJOB_RANKFILE", "JSM_NAMESPACE_LOCAL_RANK", "JSM_NAMESPACE_SIZE"}
        return required.issubset(os.environ.keys())

    @staticmethod
    def _jsm(name, what):
        value = os.environ.get(name)
        if value is None:
            raise ValueError(f"Cannot determine {what}. Environment variable `{name}` not found."
                             "Make sure you run your executable with `jsrun`.")
        return int(value)

    def world_size(self) -> int:
        return self._jsm("JSM_NAMESPACE_SIZE", "world size")

    def set_world_size(self, size: int) -> None:
        log.debug("LSFEnvironment.set_world_size was called, but setting world size is not allowed. Ignored.")

    def global_rank(self) -> int:
        return self._jsm("JSM_NAMESPACE_RANK", "global rank")

    def set_global_rank(self, rank: int) -> None:
        log.debug("LSFEnvironment.set_global_rank was called, but setting global rank is not allowed. Ignored.")

    def local_rank(self) -> int:
        return self._jsm("JSM_NAMESPACE_LOCAL_RANK", "local rank")

    def node_rank(self) -> int:
        return self._node_rank

    def _get_node_rank(self) -> int:
        order = {}
        for host in self._read_hosts():
            order.setdefault(host, len(order))
        return order[socket.gethostname()]

    @staticmethod
    def _read_hosts():
        rankfile = os.environ.get("LSB_DJOB_RANKFILE")
        if rankfile is None:
            raise ValueError("Did not find the environment variable `LSB_DJOB_RANKFILE`")
        if not rankfile:
            raise ValueError("The environment variable `LSB_DJOB_RANKFILE` is empty")
        with open(rankfile) as f:
            hosts = [line.strip() for line in f]
        return hosts[1:]  # the first line is the launch node

    def _get_main_address(self) -> str:
        return self._read_hosts()[0]

    @staticmethod
    def _get_main_port() -> int:
        if "MASTER_PORT" in os.environ:
            return int(os.environ["MASTER_PORT"])
        if "LSB_JOBID" in os.environ:
            return int(os.environ["LSB_JOBID"]) % 1000 + 10000
        raise ValueError("Could not find job id in environment variable LSB_JOBID")
