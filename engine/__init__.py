"""The engine: runs chart instances durably, and the ``incarnate`` command line."""

__all__: list[str] = []
