"""Stand-in for jax/_src/clusters/k8s_cluster.py (jax-ml/jax@2226be4; newest sources only here).

Only detection is reproduced. is_env_present(): false without KUBERNETES_SERVICE_HOST; with it, JAX imports
the `kubernetes` client package, and when that import fails it warns ("Kubernetes environment detected, but
the `kubernetes` package is not installed ... pip install jax[k8s]") and reports the cluster absent. The
package does not exist in the stand-in world, so that is always what happens. The class has no `name`
(as upstream), so a cluster_detection_method lookup that reaches it raises AttributeError, as JAX's does.
The methods past detection need the Kubernetes API (pod, job, headless service) and fail here.
"""
from __future__ import annotations

import os
import textwrap
import warnings

from jax._src import _standin
from jax._src import clusters

if not _standin.NEW:
    raise ImportError("the stand-in models K8sCluster in the newest JAX sources only")


class K8sCluster(clusters.ClusterEnv):
    # Arbitrary fixed port: there is no way to agree on one at run time.
    _coordinator_port = '55527'

    @classmethod
    def is_env_present(cls) -> bool:
        if 'KUBERNETES_SERVICE_HOST' not in os.environ:
            return False
        try:
            import kubernetes  # noqa: F401  # not installable in the stand-in world
        except ImportError:
            warnings.warn('\n'.join([
                textwrap.fill(
                    "Kubernetes environment detected, but the `kubernetes` package is not installed to enable "
                    "automatic bootstrapping in this environment. To enable automatic bootstrapping, please "
                    "install jax with the [k8s] extra. For example:"),
                "    pip install jax[k8s]",
                "    pip install jax[k8s,<MORE-EXTRAS...>]",
            ]))
            return False
        raise RuntimeError("stand-in jax: a `kubernetes` package was found, but the stand-in does not model "
                           "the Kubernetes API calls of K8sCluster")

    @classmethod
    def get_coordinator_address(cls, timeout_secs, override_coordinator_port) -> str:
        raise RuntimeError("stand-in jax: K8sCluster needs the Kubernetes API, which is not modelled")

    @classmethod
    def get_process_count(cls) -> int:
        raise RuntimeError("stand-in jax: K8sCluster needs the Kubernetes API, which is not modelled")

    @classmethod
    def get_process_id(cls) -> int:
        # JAX: the Indexed Job's completion index.
        try:
            return int(os.environ['JOB_COMPLETION_INDEX'])
        except KeyError:
            raise RuntimeError('To enable automatic bootstrap in a K8s cluster, '
                               'jobs must be indexed by setting `completionMode: "Indexed"`.')
