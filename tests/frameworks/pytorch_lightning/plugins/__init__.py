"""Stand-in for pytorch_lightning.plugins (only environments)."""
