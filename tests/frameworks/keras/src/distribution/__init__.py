"""Stand-in for keras.src.distribution."""
