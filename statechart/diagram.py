"""Diagrams of a chart: Mermaid ``stateDiagram-v2`` and Graphviz DOT text, from the compiled chart."""

from statechart._diagram import to_dot, to_mermaid

__all__ = [
    "to_dot",
    "to_mermaid",
]
