"""Stand-in for lightning.fabric.utilities.warnings (only PossibleUserWarning)."""


class PossibleUserWarning(UserWarning):
    """Warnings that could be false positives."""
