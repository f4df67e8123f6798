"""Stand-in for keras.src (see keras/__init__.py)."""
