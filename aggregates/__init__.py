"""Chart instances as event-sourced aggregates."""

__all__: list[str] = []
