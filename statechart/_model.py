"""The authoring vocabulary: states, transitions, actions and child sites.

Everything here is a frozen value built by small functions (``state``,
``transition``, ``assign``, ``invoke``…). Nothing executes at definition
time; :class:`~statechart.Chart` compiles and validates the tree.

Callables supplied by authors (guards, assigners, done data, input, output
and membership mappers) take the chart's context first. The values built
here are generic in that context type ``C`` (``StateNode[C]``,
``Transition[C]``, ``Assign[C]``, ``Site[C]``) and
``Chart(name, *states, context=Ctx)`` binds ``C`` to ``Ctx``, so a type
checker rejects a callable written for another context class, or an
assigner returning something other than the context (or ``None``). ``C`` is
contravariant: a guard taking ``object`` fits every chart. Values built
inside the ``Chart(...)`` call are inferred for ``Ctx`` (unannotated
lambdas too). A value built on its own, outside any context, is typed
``Any`` as soon as one of its parts says nothing of the context (a
transition with no callable, an unannotated lambda), and is then accepted
by every chart; annotate it (``StateNode[Ctx]``) to have it checked. The
chart also checks the context class at run time (an assigner returning
another type raises ``error.execution``).
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeAlias, assert_never, get_args, get_origin, overload

import attrs
from typing_extensions import TypeVar

from statechart._event import Event, JsonValue

C = TypeVar("C", contravariant=True, default=Any)  # noqa: PLC0105 - one name for the context type throughout
"""The context type a value is written for (``Any`` when nothing says)."""

T = TypeVar("T", default=Any)
"""The context type an authoring function infers from its callables."""

Guard: TypeAlias = "Callable[[C, Event], bool] | InState"
"""A condition on (context, event); ``in_state(...)`` tests the configuration."""

Assigner: TypeAlias = "Callable[[C, Event], C | None]"
"""Returns the new context (a frozen attrs value), or ``None`` to keep it."""

DataExpr: TypeAlias = "JsonValue | Callable[[C, Event], JsonValue]"
"""Event data: a constant JSON value or a function of (context, event)."""

InputExpr: TypeAlias = "JsonValue | Callable[[C], JsonValue]"
"""A child's input: a constant JSON value or a function of the context."""

MembersExpr: TypeAlias = "Callable[[C], Mapping[str, JsonValue]]"
"""Fan-out membership: member key -> that member's input, from the context."""

DelayExpr: TypeAlias = "float | Callable[[Any, Event], float]"
"""A delay in seconds: a constant or a function of (context, event)."""


class StateKind(enum.Enum):
    """The SCXML state kinds (SCXML 3.3-3.7, 3.10)."""

    ATOMIC = "atomic"
    COMPOUND = "compound"
    PARALLEL = "parallel"
    FINAL = "final"
    HISTORY = "history"


# ---------------------------------------------------------------- actions


def _callable_name(fn: object) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return str(name) if name else type(fn).__name__


@typing.final
@attrs.frozen
class InState:
    """Guard that holds while ``state`` is in the active configuration (SCXML ``In()``)."""

    state: str


@typing.final
@attrs.frozen
class Assign(Generic[C]):
    """Replace the context with what ``fn(context, event)`` returns."""

    fn: Assigner[C]
    name: str


@typing.final
@attrs.frozen
class Raise:
    """Put an event on the internal queue (SCXML ``<raise>``)."""

    event: str
    data: DataExpr[Any] = None


TextExpr: TypeAlias = "str | Callable[[Any, Event], str]"
"""A name: a constant string or a function of (context, event) (SCXML ``eventexpr``, ``targetexpr``…)."""

IdLocation: TypeAlias = "Callable[[Any, Event, str], Any]"
"""Stores a generated send or invoke id: ``(context, event, id) -> new context`` (SCXML ``idlocation``)."""

SCXML_PROCESSOR = "http://www.w3.org/TR/scxml/#SCXMLEventProcessor"
"""The type URI of the SCXML event I/O processor (SCXML Appendix C.1), the default one."""

SEND_TYPES = (SCXML_PROCESSOR, "scxml")
"""The ``type`` values that name the SCXML event I/O processor (the URI, and its short name)."""

BASIC_HTTP_PROCESSOR = "http://www.w3.org/TR/scxml/#BasicHTTPEventProcessor"
"""The type URI of the Basic HTTP event I/O processor (SCXML Appendix C.2)."""

HTTP_SEND_TYPES = (BASIC_HTTP_PROCESSOR, "basichttp")
"""The ``type`` values that name the Basic HTTP event I/O processor (the URI, and its short name)."""


@typing.final
@attrs.frozen
class Send:
    """Send an event (SCXML ``<send>``, 6.2), optionally after ``delay`` seconds.

    ``target`` is ``None`` (this instance's external queue), ``"#_internal"``
    (the internal queue), ``"#_parent"`` (the invoking parent),
    ``"#_<invokeid>"`` (the live child or children of a site), or
    ``"#_scxml_<sessionid>"`` (an instance by id; only this instance's own
    session can be reached). With ``type`` the Basic HTTP processor
    (:data:`HTTP_SEND_TYPES`, SCXML C.2) ``target`` is a URL and the send is
    returned as a :class:`~statechart.effects.SendHttp` effect for the engine
    to post; its ``event`` may then be omitted (the receiver names it
    ``HTTP.POST``). An unsupported ``type`` raises ``error.execution``; a
    target that cannot be reached raises ``error.communication``.
    ``event``, ``target``, ``type`` and ``delay`` may be computed from
    (context, event). ``id`` lets a later
    :class:`Cancel` withdraw the send; ``id_location`` stores the id the
    interpreter generates when none is given.
    """

    event: TextExpr | None
    data: DataExpr[Any] = None
    delay: DelayExpr = 0.0
    id: str | None = None
    target: TextExpr | None = None
    type: TextExpr | None = None
    id_location: IdLocation | None = None


@typing.final
@attrs.frozen
class Cancel:
    """Withdraw a pending :class:`Send` by its id (SCXML ``<cancel>``, 6.3); the id may be computed."""

    send_id: TextExpr


@typing.final
@attrs.frozen
class SendParent:
    """Send an event to the parent instance that invoked this one."""

    event: str
    data: DataExpr[Any] = None


@typing.final
@attrs.frozen
class SendChild:
    """Send an event to the live child of ``site`` (one member, or all when ``key`` is None)."""

    site: str
    event: str
    data: DataExpr[Any] = None
    key: str | None = None


@typing.final
@attrs.frozen
class Log:
    """Emit a log record (``label`` and data) as an effect."""

    label: str
    data: DataExpr[Any] = None


@attrs.frozen
class Branch(Generic[C]):
    """One branch of an :class:`If`: its condition (``None`` for ``else``) and its actions."""

    guard: Guard[C] | None
    actions: tuple[Action[C], ...]


@typing.final
@attrs.frozen
class If(Generic[C]):
    """Conditional actions (SCXML ``<if>``/``<elseif>``/``<else>``, 4.3).

    The branches' conditions are tried in order and the first that holds
    runs its actions; a branch whose guard is ``None`` always holds. A
    condition that raises is false and raises ``error.execution`` (5.9).
    """

    branches: tuple[Branch[C], ...]


def _bind_attribute(context: Any, name: str, value: JsonValue) -> Any:
    if not attrs.has(type(context)):
        raise TypeError(
            f"foreach cannot set {name!r} on a {type(context).__name__} context; "
            "give foreach(bind=...) a function (context, name, value) -> context"
        )
    return attrs.evolve(context, **{name: value})


Binder: TypeAlias = "Callable[[Any, str, JsonValue], Any]"
"""Sets one variable: ``(context, name, value) -> new context`` (``foreach`` item and index)."""


@typing.final
@attrs.frozen
class ForEach(Generic[C]):
    """Run actions once per item of a collection (SCXML ``<foreach>``, 4.6).

    ``items(context, event)`` is evaluated once and copied, so actions that
    change the collection do not change the iteration. Before each pass the
    item (and the index, when named) is set on the context with ``bind``.
    A collection that is not iterable raises ``error.execution``; an error
    inside the actions stops the whole block.
    """

    items: Callable[[C, Event], Any]
    item: str
    actions: tuple[Action[C], ...]
    index: str | None = None
    bind: Binder = _bind_attribute


@typing.final
@attrs.frozen
class Block(Generic[C]):
    """A block of executable content of its own (SCXML 4.9): an error inside stops this block only.

    A state's ``entry`` (or ``exit``) is one block; a state with several
    ``<onentry>`` handlers has one :class:`Block` per handler, so an error
    in the first still runs the second.
    """

    actions: tuple[Action[C], ...]


Action: TypeAlias = (
    Assign[C] | Raise | Send | Cancel | SendParent | SendChild | Log | If[C] | ForEach[C] | Block[C]
)
"""An action of a chart whose context is ``C``: a closed union, one class per kind of executable content.

A new kind is a new class added here; every table of handlers made with
:func:`for_every_action` (the interpreter's, the diagram's, the SCXML
dump's) then refuses to import until it handles the new class, and every
``match`` over actions ends in ``assert_never`` so mypy names the switch
that misses it.
"""

ACTION_TYPES: tuple[type[Any], ...] = tuple(get_origin(member) or member for member in get_args(Action))
"""The action classes, in the order of the :data:`Action` union."""

H = TypeVar("H")


def for_every_action(purpose: str, table: Mapping[type[Any], H]) -> dict[type[Any], H]:
    """``table`` (action class -> handler) once it holds exactly one handler per action class.

    A module builds its table at import, so an action class added to
    :data:`Action` without its handler fails that import with a
    ``TypeError`` naming the class and ``purpose``, instead of being
    skipped at run time.
    """
    missing = [cls.__name__ for cls in ACTION_TYPES if cls not in table]
    extra = [getattr(cls, "__name__", repr(cls)) for cls in table if cls not in ACTION_TYPES]
    if missing:
        raise TypeError(
            f"{purpose} has no handler for the action class(es) {', '.join(missing)}; "
            "every class of the Action union needs one: add it to the table"
        )
    if extra:
        raise TypeError(
            f"{purpose} handles {', '.join(extra)}, which the Action union does not hold; "
            "add the class to statechart._model.Action or remove its handler"
        )
    return dict(table)


def blocks(action: Action[C]) -> tuple[tuple[Guard[C] | None, tuple[Action[C], ...]], ...]:
    """The blocks of actions inside ``action``, each with the condition it runs under (``None``: none).

    An ``if`` has one per branch (its ``else`` unconditioned), a ``foreach``
    or a block one; the other actions hold none. Validation walks nested
    content with this, so an action class that holds none needs nothing there.
    """
    match action:
        case If():
            return tuple((branch.guard, branch.actions) for branch in action.branches)
        case ForEach() | Block():
            return ((None, action.actions),)
        case Assign() | Raise() | Send() | Cancel() | SendParent() | SendChild() | Log():
            return ()
        case _:
            assert_never(action)


ActionLike: TypeAlias = "Action[C] | Assigner[C]"
"""An action, or a bare assigner ``(context, event) -> context | None``."""


@overload
def assign(fn: Callable[[T, Event], T], *, name: str | None = None) -> Assign[T]: ...


@overload
def assign(fn: Callable[[T, Event], None], *, name: str | None = None) -> Assign[T]: ...


def assign(fn: Assigner[T], *, name: str | None = None) -> Assign[T]:
    """An action that replaces the context with ``fn(context, event)`` (``None`` keeps it)."""
    return Assign(fn, name or _callable_name(fn))


def raise_event(event: str, data: DataExpr[Any] = None) -> Raise:
    """An action that raises an internal event."""
    return Raise(event, data)


def send(
    event: TextExpr | None,
    data: DataExpr[Any] = None,
    *,
    delay: DelayExpr = 0.0,
    id: str | None = None,
    target: TextExpr | None = None,
    type: TextExpr | None = None,
    id_location: IdLocation | None = None,
) -> Send:
    """An action that sends an event (to this instance unless ``target`` says otherwise), optionally delayed.

    See :class:`Send` for the targets. ``event`` may be ``None`` only for a
    send whose target is not this instance's own queue.
    """
    if id is not None and id_location is not None:
        raise ValueError("send() takes id= or id_location=, not both (SCXML 6.2.1)")
    return Send(event, data, delay, id, target, type, id_location)


def cancel(send_id: TextExpr) -> Cancel:
    """An action that cancels a delayed send by id (or by an id computed from (context, event))."""
    return Cancel(send_id)


def send_parent(event: str, data: DataExpr[Any] = None) -> SendParent:
    """An action that sends an event to the invoking parent."""
    return SendParent(event, data)


def send_child(site: str, event: str, data: DataExpr[Any] = None, *, key: str | None = None) -> SendChild:
    """An action that sends an event to the child (or members) of a site."""
    return SendChild(site, event, data, key)


def log(label: str, data: DataExpr[Any] = None) -> Log:
    """An action that records a log effect."""
    return Log(label, data)


def if_(
    guard: Guard[T],
    actions: Sequence[ActionLike[T]],
    *,
    elif_: Sequence[tuple[Guard[T], Sequence[ActionLike[T]]]] = (),
    else_: Sequence[ActionLike[T]] = (),
) -> If[T]:
    """Conditional actions: ``actions`` if ``guard`` holds, else the first ``elif_`` or ``else_``.

    SCXML ``<if>``/``<elseif>``/``<else>`` (4.3).
    """
    branches: list[Branch[T]] = [Branch(guard, _actions(actions))]
    branches.extend(Branch(g, _actions(a)) for g, a in elif_)
    if else_:
        branches.append(Branch(None, _actions(else_)))
    return If(tuple(branches))


def foreach(
    items: Callable[[T, Event], Any],
    actions: Sequence[ActionLike[T]],
    *,
    item: str,
    index: str | None = None,
    bind: Binder | None = None,
) -> ForEach[T]:
    """Run ``actions`` once per element of ``items(context, event)``, with ``item`` (and ``index``) set.

    By default ``item`` and ``index`` name fields of an attrs context, set
    with ``attrs.evolve``; ``bind`` replaces that for other contexts.
    """
    return ForEach(items, item, _actions(actions), index, bind or _bind_attribute)


def block(actions: Sequence[ActionLike[T]]) -> Block[T]:
    """A separate block of actions: an error inside stops it, and the actions after it still run."""
    return Block(_actions(actions))


def in_state(state: str) -> InState:
    """A guard true while ``state`` is active."""
    return InState(state)


def _actions(items: Sequence[ActionLike[T]]) -> tuple[Action[T], ...]:
    out: list[Action[T]] = []
    for item in items:
        if isinstance(item, ACTION_TYPES):
            out.append(item)
        elif callable(item):
            out.append(Assign(item, _callable_name(item)))
        else:
            raise TypeError(
                f"an action must be an action value (assign, raise_event, send, …) or a "
                f"callable (context, event) -> context, got {item!r}"
            )
    return tuple(out)


# ------------------------------------------------------------ transitions


@attrs.frozen
class Transition(Generic[C]):
    """A transition (SCXML 3.5). No events means eventless; ``delay`` means ``after``."""

    events: tuple[str, ...]
    targets: tuple[str, ...]
    guard: Guard[C] | None = None
    actions: tuple[Action[C], ...] = ()
    internal: bool = False
    delay: float | None = None
    id: str | None = None


def _split_events(events: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(events, str):
        return tuple(events.split())
    return tuple(token for item in events for token in item.split())


def _targets(target: str | Sequence[str] | None) -> tuple[str, ...]:
    if target is None:
        return ()
    if isinstance(target, str):
        return tuple(target.split())
    return tuple(target)


def transition(
    event: str | Sequence[str],
    target: str | Sequence[str] | None = None,
    *,
    guard: Guard[T] | None = None,
    actions: Sequence[ActionLike[T]] = (),
    internal: bool = False,
    id: str | None = None,
) -> Transition[T]:
    """A transition on ``event`` (space-separated SCXML descriptors, ``*`` matches all).

    Without ``target`` the transition is targetless: it runs its actions and
    leaves the configuration alone. ``internal=True`` does not exit a compound
    source when every target is its descendant (SCXML 3.13).
    """
    events = _split_events(event)
    if not events:
        raise ValueError(
            "transition() needs at least one event descriptor; use always() for an eventless transition"
        )
    return Transition(events, _targets(target), guard, _actions(actions), internal, None, id)


def always(
    target: str | Sequence[str] | None = None,
    *,
    guard: Guard[T] | None = None,
    actions: Sequence[ActionLike[T]] = (),
    internal: bool = False,
    id: str | None = None,
) -> Transition[T]:
    """An eventless transition, taken as soon as its guard holds."""
    return Transition((), _targets(target), guard, _actions(actions), internal, None, id)


def after(
    seconds: float,
    target: str | Sequence[str] | None = None,
    *,
    guard: Guard[T] | None = None,
    actions: Sequence[ActionLike[T]] = (),
    id: str | None = None,
) -> Transition[T]:
    """A delayed transition: taken ``seconds`` after its state was entered.

    Entering the state arms a timer; leaving it cancels the timer.
    """
    if not seconds >= 0:
        raise ValueError(f"after() needs a delay >= 0 seconds, got {seconds!r}")
    return Transition((), _targets(target), guard, _actions(actions), False, float(seconds), id)


# ------------------------------------------------------------ child sites


@attrs.frozen
class RetryPolicy:
    """How often a failed child is retried, and how long to wait between attempts.

    ``max_attempts`` counts the first attempt: 1 means never retry. The wait
    before attempt ``n`` (n >= 2) is ``backoff * multiplier ** (n - 2)``,
    capped at ``max_backoff``.
    """

    max_attempts: int = 1
    backoff: float = 0.0
    multiplier: float = 2.0
    max_backoff: float = 3600.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before starting ``attempt``."""
        if attempt < 2:
            return 0.0
        return float(min(self.max_backoff, self.backoff * self.multiplier ** (attempt - 2)))


@attrs.frozen
class Site(Generic[C]):
    """A place on a state that spawns children (SCXML ``<invoke>``).

    Exactly one of ``chart`` (a registered chart name) and ``task`` (a
    registered task name) is set. ``members`` turns the site into a fan-out:
    each key it returns is one child. ``group`` and ``max_depth`` declare a
    recursive site. ``choose(context)`` instead of ``chart`` picks, at each
    birth, which of the registered ``charts`` the child runs (SCXML
    ``<invoke srcexpr>``): the birth records the chart it picked.

    The site's id names its children (their Refs) and, by default, each
    invocation (SCXML's invoke id: ``_event.invokeid``, ``#_<invokeid>``,
    ``done.invoke.<invokeid>``). With ``generated_id`` (an ``<invoke>`` that
    gives no id) each invocation is named ``<state>.<generation>`` instead:
    the id of the site's state and the generation of the incarnation (SCXML
    6.4.1's ``stateid.platformid``, unique in the instance and the same
    after recovery). ``id_location`` stores the invocation's name in the
    context when the child is born (SCXML ``idlocation``).
    """

    id: str
    chart: str | None
    task: str | None
    input: InputExpr[C] = None
    members: MembersExpr[C] | None = None
    output: Assigner[C] | None = None
    retry: RetryPolicy = RetryPolicy()
    group: str | None = None
    max_depth: int | None = None
    finalize: tuple[Action[C], ...] = ()
    autoforward: bool = False
    choose: Callable[[C], str] | None = None
    charts: tuple[str, ...] = ()
    generated_id: bool = False
    id_location: IdLocation | None = None

    @property
    def chart_names(self) -> tuple[str, ...]:
        """The charts this site may run: its ``chart``, or the ``charts`` that ``choose`` picks from."""
        if self.chart is not None:
            return (self.chart,)
        return self.charts


def invoke(
    id: str,
    *,
    chart: str | None = None,
    task: str | None = None,
    input: InputExpr[T] = None,
    map: MembersExpr[T] | None = None,
    output: Assigner[T] | None = None,
    retry: RetryPolicy | None = None,
    group: str | None = None,
    max_depth: int | None = None,
    finalize: Sequence[ActionLike[T]] = (),
    autoforward: bool = False,
    choose: Callable[[T], str] | None = None,
    charts: Sequence[str] = (),
) -> Site[T]:
    """A child site on a state.

    While the state is active the site keeps its children alive: one child,
    or with ``map`` one per member key. ``output(context, event)`` maps the
    ``done.invoke.<id>`` event of each child back into the context before the
    chart sees it. A fan-out site raises ``done.invoke.<id>`` once, when every
    member has finished, with ``{key: output}`` as data.

    ``finalize`` runs on every event a child of the site sends (its messages,
    its done or final error event), before the chart selects transitions on
    it (SCXML ``<finalize>``, 6.5). With ``autoforward`` every external event
    the instance processes is also sent to the site's running children (6.4),
    the events those children sent included (as ordinary events, see
    :func:`statechart.event.detach`). ``choose`` (with ``charts``, the
    charts it may return) computes the child's chart at each birth instead
    of ``chart``.
    """
    return Site(
        id,
        chart,
        task,
        input,
        map,
        output,
        retry or RetryPolicy(),
        group,
        max_depth,
        _actions(finalize),
        autoforward,
        choose,
        tuple(charts),
    )


# ----------------------------------------------------------------- states


@attrs.frozen
class StateNode(Generic[C]):
    """One node of the state tree, as authored, for a chart whose context is ``C``."""

    id: str
    kind: StateKind
    children: tuple[StateNode[C], ...] = ()
    initial: tuple[str, ...] = ()
    transitions: tuple[Transition[C], ...] = ()
    entry: tuple[Action[C], ...] = ()
    exit: tuple[Action[C], ...] = ()
    sites: tuple[Site[C], ...] = ()
    done_data: DataExpr[C] = None
    deep: bool = False
    initial_actions: tuple[Action[C], ...] = ()


def state(
    id: str,
    *children: StateNode[T],
    initial: str | Sequence[str] | None = None,
    on: Sequence[Transition[T]] = (),
    entry: Sequence[ActionLike[T]] = (),
    exit: Sequence[ActionLike[T]] = (),
    invoke: Sequence[Site[T]] = (),
    initial_actions: Sequence[ActionLike[T]] = (),
) -> StateNode[T]:
    """An atomic state, or a compound one when it has children.

    A compound state enters ``initial`` by default, else its first child in
    document order (SCXML 3.3). ``initial_actions`` are the executable
    content of its ``<initial>`` transition (3.6): they run when the state is
    entered by default, after its entry actions and before its children are
    entered.
    """
    kind = StateKind.COMPOUND if children else StateKind.ATOMIC
    return StateNode(
        id,
        kind,
        tuple(children),
        _targets(initial),
        tuple(on),
        _actions(entry),
        _actions(exit),
        tuple(invoke),
        initial_actions=_actions(initial_actions),
    )


def parallel(
    id: str,
    *children: StateNode[T],
    on: Sequence[Transition[T]] = (),
    entry: Sequence[ActionLike[T]] = (),
    exit: Sequence[ActionLike[T]] = (),
    invoke: Sequence[Site[T]] = (),
) -> StateNode[T]:
    """A parallel state: every child region is active at once (SCXML 3.4)."""
    return StateNode(
        id,
        StateKind.PARALLEL,
        tuple(children),
        (),
        tuple(on),
        _actions(entry),
        _actions(exit),
        tuple(invoke),
    )


def final(
    id: str,
    *,
    done_data: DataExpr[T] = None,
    entry: Sequence[ActionLike[T]] = (),
    exit: Sequence[ActionLike[T]] = (),
) -> StateNode[T]:
    """A final state (SCXML 3.7); ``done_data`` becomes the done event's data."""
    return StateNode(
        id,
        StateKind.FINAL,
        entry=_actions(entry),
        exit=_actions(exit),
        done_data=done_data,
    )


def history(
    id: str,
    default: str | Sequence[str] | None = None,
    *,
    deep: bool = False,
    actions: Sequence[ActionLike[T]] = (),
) -> StateNode[T]:
    """A history pseudo-state (SCXML 3.10); ``default`` is used before any exit."""
    default_transition: Transition[T] = Transition((), _targets(default), None, _actions(actions))
    return StateNode(id, StateKind.HISTORY, transitions=(default_transition,), deep=deep)
