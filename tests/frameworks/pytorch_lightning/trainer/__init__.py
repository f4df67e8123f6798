"""Stand-in for pytorch_lightning.trainer (only the accelerator connector's environment choice)."""
