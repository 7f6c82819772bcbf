"""Storage configuration: one class per store kind, chosen by a URL scheme or ``PERSISTENCE_MODULE``.

The engine stores everything through ``eventsourcing``: POPO (in memory,
for tests), SQLite (a file; the embedded default) or PostgreSQL (engine
groups). Each kind is one subclass of :class:`Storage` — its settings, how
it reads them from a URL and from the library's environment variables
(``PERSISTENCE_MODULE``, ``SQLITE_DBNAME``, ``POSTGRES_*``), how it
describes itself, which of its strings are secret, and the adapter it
opens — registered once by :func:`register_storage`. Nothing else in the
code switches on the kind.

Nothing waits on the store without a bound: each timeout and the maximum
payload size is the value given to the Storage, else its environment
variable, else a documented default (``docs/reference/configuration.md``).
"""

from __future__ import annotations

import abc
import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs
from eventsourcing.utils import resolve_topic

from incarnate._limits import DEFAULT_MAX_PAYLOAD_BYTES, MAX_PAYLOAD_VARIABLE, setting
from incarnate.errors import ConfigurationError

if TYPE_CHECKING:
    from incarnate.store._port import Store

DEFAULT_SQLITE_PATH = "incarnate.db"
DEFAULT_SCHEME = "sqlite"
"""The kind a bare path names (``--db work/incarnate.db``), and the one an environment naming none gets."""

SQLITE = "incarnate.store._sqlite:SQLiteStorage"
POSTGRES = "incarnate.store._postgres_storage:PostgresStorage"
MEMORY = "incarnate.store._memory:MemoryStorage"
BUILT_IN = (SQLITE, POSTGRES, MEMORY)
"""The store kinds incarnate ships, registered on first use (each module imports no database driver).

Named by topic: each kind's module imports this one, never the other way round."""


@attrs.frozen
class Storage(abc.ABC):
    """Where an engine keeps its events: the settings of one store kind.

    Build one with :meth:`sqlite`, :meth:`postgres`, :meth:`popo`,
    :meth:`from_url` or :meth:`from_env`; each kind is a subclass
    (:class:`~incarnate.SQLiteStorage`, :class:`~incarnate.PostgresStorage`,
    :class:`~incarnate.MemoryStorage`, or one of your own, see
    :func:`register_storage`).
    """

    schemes: ClassVar[tuple[str, ...]] = ()
    """The URL schemes (``SCHEME://…``) that name this kind; the first is the one :meth:`url` writes."""
    modules: ClassVar[tuple[str, ...]] = ()
    """The ``PERSISTENCE_MODULE`` values that select this kind; the first is the one messages suggest."""
    url_form: ClassVar[str] = ""
    """How a URL of this kind is written, for messages (``postgresql://USER@HOST/DBNAME``)."""
    timeouts: ClassVar[Mapping[str, tuple[str, int]]] = {}
    """This kind's timeouts: name (a field of the class) → (environment variable, default seconds)."""
    transactional: ClassVar[bool] = True
    """Whether a commit is a database transaction, which a process can die inside (after its inserts,
    before its ``COMMIT``); ``incarnate.testing`` crashes there only where it is one."""

    max_payload_bytes: int | None = attrs.field(default=None, kw_only=True)
    extra: tuple[tuple[str, str], ...] = attrs.field(default=(), kw_only=True)
    """More ``eventsourcing`` settings, added to :meth:`env` as they are."""

    # ------------------------------------------------------- constructors

    @staticmethod
    def popo(name: str = "", *, max_payload_bytes: int | None = None) -> Storage:
        """In memory (a :class:`~incarnate.MemoryStorage`): nothing survives the process (tests).

        Engines given the same non-empty ``name`` share one in-memory store,
        so a test can stop an engine and start a fresh one over the same data.
        """
        return _built_in(MEMORY, name, max_payload_bytes=max_payload_bytes)

    @staticmethod
    def sqlite(
        path: str | os.PathLike[str] = DEFAULT_SQLITE_PATH,
        *,
        max_payload_bytes: int | None = None,
        lock_timeout: int | None = None,
    ) -> Storage:
        """A SQLite file (WAL mode) at ``path`` (a str or a path object): a :class:`SQLiteStorage`."""
        return _built_in(
            SQLITE, os.fspath(path), max_payload_bytes=max_payload_bytes, lock_timeout=lock_timeout
        )

    @staticmethod
    def postgres(
        dbname: str,
        *,
        host: str = "127.0.0.1",
        port: int = 5432,
        user: str = "postgres",
        password: str = "",
        schema: str = "",
        create_tables: bool = True,
        max_payload_bytes: int | None = None,
        connect_timeout: int | None = None,
        statement_timeout: int | None = None,
        lock_timeout: int | None = None,
        idle_in_transaction_timeout: int | None = None,
    ) -> Storage:
        """A PostgreSQL database named ``dbname`` (a :class:`~incarnate.PostgresStorage`).

        The timeouts are in whole seconds.
        """
        return _built_in(
            POSTGRES,
            dbname,
            host=host,
            port=port,
            user=user,
            password=password,
            schema=schema,
            create_tables=create_tables,
            max_payload_bytes=max_payload_bytes,
            connect_timeout=connect_timeout,
            statement_timeout=statement_timeout,
            lock_timeout=lock_timeout,
            idle_in_transaction_timeout=idle_in_transaction_timeout,
        )

    @classmethod
    def from_url(cls, text: str) -> Storage:
        """A store named the way ``--db`` takes it: ``SCHEME://…``, or a bare path for a SQLite file.

        The scheme picks the registered kind (see :func:`accepted_forms`),
        whose :meth:`parse_url` reads the rest. Anything else raises a
        :class:`ConfigurationError` naming the accepted forms; a password is
        never repeated in it. Called on a kind (``SQLiteStorage.from_url``),
        it reads that kind's URLs only.
        """
        text = text.strip()
        if not text:
            raise ConfigurationError(f"an empty store name; give {accepted_forms()}")
        scheme, separator, _ = text.partition("://")
        scheme = scheme.lower() if separator else DEFAULT_SCHEME
        kind = cls if scheme in cls.schemes else _kind_of_scheme(scheme)
        if kind is None:
            raise ConfigurationError(f"store URL scheme {scheme!r} is not supported; give {accepted_forms()}")
        if not issubclass(kind, cls):
            named = f"{scheme}:// URL" if separator else "file path"
            raise ConfigurationError(
                f"{cls.__name__}.from_url was given a {named}, which names a {kind.__name__}; "
                "use Storage.from_url to accept any kind"
            )
        return kind.parse_url(text)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Storage:
        """Read the eventsourcing variables; SQLite at ``./incarnate.db`` when none are set.

        ``PERSISTENCE_MODULE`` picks the registered kind, whose
        :meth:`parse_env` reads its own variables. Called on a kind
        (``PostgresStorage.from_env``), it reads that kind's variables.
        """
        env = os.environ if environ is None else environ
        module = env.get("PERSISTENCE_MODULE", "")
        if cls is not Storage and (not module or module in cls.modules):
            return cls.parse_env(env)
        kind = _kind_of_module(module) if module else _kind_of_scheme(DEFAULT_SCHEME)
        if kind is None:
            known = sorted(k.modules[0] for k in _kinds() if k.modules)
            raise ConfigurationError(f"PERSISTENCE_MODULE={module!r} is not supported; use one of {known}")
        if not issubclass(kind, cls):
            raise ConfigurationError(
                f"PERSISTENCE_MODULE={module!r} selects {kind.__name__}, not {cls.__name__}; "
                "use Storage.from_env to accept any kind"
            )
        return kind.parse_env(env)

    @classmethod
    def parse_url(cls, text: str) -> Storage:
        """This kind read from a URL whose scheme names it (each kind with a URL form overrides this)."""
        raise ConfigurationError(f"{cls.__name__} has no URL form; give {accepted_forms()}")

    @classmethod
    def parse_env(cls, env: Mapping[str, str]) -> Storage:
        """This kind read from environment variables (each kind ``PERSISTENCE_MODULE`` names overrides it)."""
        raise ConfigurationError(f"{cls.__name__} cannot be configured by environment variables")

    # ------------------------------------------------------- what each kind says

    @abc.abstractmethod
    def open(self) -> Store:
        """The adapter of this kind (:mod:`incarnate.store`): what the engine talks to."""

    @abc.abstractmethod
    def describe(self) -> str:
        """A one-line description for logs and messages (never a secret)."""

    def url(self) -> str:
        """This storage as a ``--db`` value (:meth:`from_url` reads it back), without secrets."""
        raise ConfigurationError(f"{self.describe()} has no URL")

    def secrets(self) -> tuple[str, ...]:
        """The strings never to print (a password): messages and logs show them as ``***``."""
        return ()

    def missing(self, named_by: str) -> str | None:
        """Why this store surely does not exist yet, as a message; None when it may exist.

        A command that only reads or repairs a store refuses one that is
        missing rather than create it empty. ``named_by`` says where the
        store was named (``--db``, the environment).
        """
        return None

    def forget(self) -> None:  # noqa: B027 -- most kinds hold nothing in the process
        """Drop what this storage holds in this process (a named in-memory store); else nothing."""

    # ------------------------------------------------------- settings every kind has

    def env(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The eventsourcing environment for this storage (``environ`` fills unset timeouts)."""
        env = self.open().environment(environ)
        env.update(dict(self.extra))
        return env

    def payload_limit(self, environ: Mapping[str, str] | None = None) -> int:
        """The maximum encoded size of one stored event, in bytes.

        ``max_payload_bytes`` when set, else ``INCARNATE_MAX_PAYLOAD_BYTES``,
        else 4 MiB.
        """
        env = os.environ if environ is None else environ
        return setting(self.max_payload_bytes, MAX_PAYLOAD_VARIABLE, DEFAULT_MAX_PAYLOAD_BYTES, env)

    def timeout(self, name: str, environ: Mapping[str, str] | None = None) -> int:
        """A timeout of this kind in seconds (see :attr:`timeouts`).

        The value given to this Storage when set, else its environment
        variable, else the default.
        """
        known = type(self).timeouts
        if name not in known:
            raise ConfigurationError(
                f"{type(self).__name__} has no timeout {name!r}; its timeouts are {sorted(known)}"
            )
        variable, default = known[name]
        env = os.environ if environ is None else environ
        value: int | None = getattr(self, name)
        return setting(value, variable, default, env)


def optional_setting(env: Mapping[str, str], variable: str) -> int | None:
    """An optional whole-number setting from the environment (None when unset or empty)."""
    raw = env.get(variable, "").strip()
    return setting(None, variable, 0, {variable: raw}) if raw else None


def without_password(text: str, password: str | None) -> str:
    """``text`` with its password (when it has one) shown as ``***``."""
    if not password:
        return text
    return text.replace(f":{password}@", ":***@", 1).replace(password, "***")


# ------------------------------------------------------------------ the registry

_SCHEMES: dict[str, type[Storage]] = {}
_MODULES: dict[str, type[Storage]] = {}
_REGISTRY_LOCK = threading.RLock()
_loaded = False


def register_storage(kind: type[Storage]) -> type[Storage]:
    """Make ``kind`` a store kind: its :attr:`~Storage.schemes` and :attr:`~Storage.modules` now name it.

    Usable as a class decorator. Registering a class again does nothing; a
    scheme or module another kind has already taken is a
    :class:`ConfigurationError` naming both.
    """
    if not (isinstance(kind, type) and issubclass(kind, Storage)):
        raise ConfigurationError(f"register_storage takes a subclass of Storage, got {kind!r}")
    if not kind.schemes and not kind.modules:
        raise ConfigurationError(
            f"{kind.__name__} names no URL scheme and no PERSISTENCE_MODULE value; set "
            "schemes = ('myscheme',) or modules = ('mypackage.persistence',) on the class"
        )
    with _REGISTRY_LOCK:
        _load_built_in()
        _add(kind)
    return kind


def unregister_storage(kind: type[Storage]) -> None:
    """Forget ``kind``'s schemes and modules (tests that registered a kind of their own)."""
    with _REGISTRY_LOCK:
        for table in (_SCHEMES, _MODULES):
            for key in [k for k, v in table.items() if v is kind]:
                del table[key]


def accepted_forms() -> str:
    """Every URL form the registered kinds accept, for messages."""
    forms = [k.url_form for k in _kinds() if k.url_form]
    return forms[0] if len(forms) == 1 else f"{', '.join(forms[:-1])}, or {forms[-1]}"


def _built_in(topic: str, *args: object, **kwargs: object) -> Storage:
    """A storage of the built-in kind ``topic``."""
    kind: Any = resolve_topic(topic)
    storage: Storage = kind(*args, **kwargs)
    return storage


def _add(kind: type[Storage]) -> None:
    for table, keys, what in ((_SCHEMES, kind.schemes, "URL scheme"), (_MODULES, kind.modules, "module")):
        for key in keys:
            taken = table.get(key)
            if taken is not None and taken is not kind:
                raise ConfigurationError(
                    f"{what} {key!r} of {kind.__name__} is already registered by {taken.__name__}"
                )
    for table, keys in ((_SCHEMES, kind.schemes), (_MODULES, kind.modules)):
        for key in keys:
            table[key] = kind


def _load_built_in() -> None:
    global _loaded  # noqa: PLW0603 -- the registry is loaded once, on first use
    if _loaded:
        return
    for topic in BUILT_IN:
        _add(resolve_topic(topic))
    _loaded = True


def _kinds() -> list[type[Storage]]:
    with _REGISTRY_LOCK:
        _load_built_in()
        return list(dict.fromkeys([*_SCHEMES.values(), *_MODULES.values()]))


def _kind_of_scheme(scheme: str) -> type[Storage] | None:
    with _REGISTRY_LOCK:
        _load_built_in()
        return _SCHEMES.get(scheme)


def _kind_of_module(module: str) -> type[Storage] | None:
    with _REGISTRY_LOCK:
        _load_built_in()
        return _MODULES.get(module)
