"""Projections of instance events: checkpoints, listings, trees and timelines."""

__all__: list[str] = []
