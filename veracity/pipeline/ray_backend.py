"""The Ray backend under its former name: this module IS :mod:`veracity.pipeline.backends.ray` (kept so
``veracity.pipeline.ray_backend`` keeps working for callers and the integration tests)."""

import sys

from veracity.pipeline.backends import ray as _ray

sys.modules[__name__] = _ray
