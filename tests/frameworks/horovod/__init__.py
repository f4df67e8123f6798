"""Stand-in of Horovod (horovod/__init__.py): how `hvd.init()` finds its world. See common/basics.py."""
__version__ = "0.28.1"
