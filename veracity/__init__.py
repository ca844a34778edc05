"""veracity: offline claim verification with multi-agent methods on a local model and a local index."""

from veracity import offline as _offline

__version__ = "0.1.0"

# every library's phone-home off in this process and each child it starts (veracity/offline.py)
_offline.apply()
