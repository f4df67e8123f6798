"""Stand-in for the generated keras/distribution/__init__.py: the public names of keras.distribution that
the stand-in models."""
from keras.src.distribution.distribution_lib import initialize as initialize
from keras.src.distribution.distribution_lib import list_devices as list_devices
