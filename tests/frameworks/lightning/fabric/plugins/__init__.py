"""Stand-in for lightning.fabric.plugins."""
from lightning.fabric.plugins.environments import ClusterEnvironment as ClusterEnvironment
