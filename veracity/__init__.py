"""veracity: offline claim verification with multi-agent methods on a local model and a local index."""

__version__ = "0.1.0"
