"""Stand-in for lightning.fabric (only plugins.environments and the connector's environment choice)."""
