"""Stand-in for the lightning.fabric.utilities the environments use."""
