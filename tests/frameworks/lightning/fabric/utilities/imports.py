"""Stand-in for lightning.fabric.utilities.imports (only _IS_WINDOWS)."""
import platform

_IS_WINDOWS = platform.system() == "Windows"
