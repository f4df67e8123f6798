"""Stand-in for pytorch_lightning.trainer.connectors."""
