"""Jobs of several nodes on this machine: one distrun per node (explicit --num-nodes/--node-rank and one
coordinator address on loopback), node 0 hosting the service."""
import socket

from launch_helpers import LaunchCase


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MultiNodeCase(LaunchCase):
    """Starts several distrun processes on this machine, each one node of one job on a loopback port."""

    def start_nodes(self, counts, script, *extra, per_node_extra=None, env=None, preexec_fn=None):
        """One distrun per entry of `counts` (its worker count), all running `sh -c script`."""
        self.port = free_port()
        nodes = []
        for rank, count in enumerate(counts):
            args = ["--num-nodes", str(len(counts)), "--node-rank", str(rank),
                    "--coordinator-address", f"127.0.0.1:{self.port}", "--nproc-per-node", str(count),
                    "--tag-output", "on", "--tag-template", "[{rank}] ", "--grace-period", "5", *extra]
            if per_node_extra:
                args += per_node_extra.get(rank, [])
            nodes.append(self.popen(args + ["--", "sh", "-c", script],
                                    env=self.env(OUT=self.dir, NODE=str(rank), **(env or {})),
                                    preexec_fn=preexec_fn))
        return nodes

    def finish(self, nodes, timeout=60):
        results = []
        for p in nodes:
            out, err = p.communicate(timeout=timeout)
            results.append((p.returncode, out, err))
        return results
