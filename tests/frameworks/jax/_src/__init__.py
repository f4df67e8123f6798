"""Stand-in for the private package jax._src (see tests/frameworks/jax/__init__.py)."""
