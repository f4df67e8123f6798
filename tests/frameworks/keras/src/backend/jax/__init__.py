"""Stand-in for keras.src.backend.jax (only distribution_lib)."""
