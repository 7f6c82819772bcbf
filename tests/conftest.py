"""Shared pytest configuration: the Hypothesis profiles.

``HYPOTHESIS_PROFILE`` picks one: ``default`` (small, for local runs) or
``ci`` (more examples, and a reproduction blob printed with each failure).
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("default", max_examples=50, deadline=None)
settings.register_profile("ci", max_examples=200, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
