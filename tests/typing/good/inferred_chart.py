"""Charts written without an annotation, as the README writes them: mypy infers their context type."""

from __future__ import annotations

from typing import assert_type

import attrs

from statechart import (
    Chart,
    Event,
    JsonValue,
    NoContext,
    assign,
    final,
    invoke,
    start,
    state,
    step,
    transition,
)


@attrs.frozen
class Cart:
    """What is in the cart."""

    items: int = 0
    note: JsonValue = None


def add(cart: Cart, event: Event) -> Cart:
    """One more item."""
    return attrs.evolve(cart, items=cart.items + 1)


def anything(context: object, event: Event) -> bool:
    """A guard for every chart: it takes ``object``."""
    return event.data is not None


CHECKOUT = Chart(
    "checkout",
    state(
        "shopping",
        on=[
            transition("add", actions=[assign(add)]),
            transition("clear", guard=anything, actions=[lambda cart, event: attrs.evolve(cart, items=0)]),
            transition("pay", "paying"),
        ],
    ),
    state(
        "paying",
        invoke=[
            invoke(
                "charge",
                task="charge",
                input=lambda cart: {"items": cart.items},
                output=lambda cart, event: attrs.evolve(cart, note=event.data),
            )
        ],
        on=[transition("done.invoke.charge", "paid", guard=lambda cart, event: cart.items > 0)],
    ),
    final("paid", done_data=lambda cart, event: {"items": cart.items}),
    context=Cart,
)
assert_type(CHECKOUT, Chart[Cart])

PLAIN = Chart("plain", state("open", on=[transition("close", "closed")]), final("closed"))
assert_type(PLAIN, Chart[NoContext])


def items_after_adding(chart: Chart[Cart]) -> int:
    """A function written for carts accepts the inferred chart."""
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("add"))
    return snapshot.context.items


TYPED: Chart[Cart] = CHECKOUT
ADDED = items_after_adding(CHECKOUT)
