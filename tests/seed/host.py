"""Stand-ins for the Harnest host the seed's samples run in: ``context``, ``lifecycle`` and ``tool``.

The seed's samples import these from ``harnest`` (``from harnest import context, lifecycle``,
``from harnest.agent import tool``). Quarry is not a Harnest agent, so these few lines give
the samples what they use and nothing more: a provider registry whose resources are
started and stopped by the test (``context.running``), the current invocation's user
(``context.invocation``), and decorators that leave a function as it is.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

_user: ContextVar[str] = ContextVar("user_id")


@dataclass(frozen=True)
class Invocation:
    user_id: str


class Context:
    def __init__(self) -> None:
        self._providers: dict[str, Callable[[], AsyncIterator[Any]]] = {}
        self._resources: dict[str, Any] = {}

    def provider(self, name: str) -> Callable[[Callable[[], AsyncIterator[Any]]], Callable[[], AsyncIterator[Any]]]:
        def register(factory: Callable[[], AsyncIterator[Any]]) -> Callable[[], AsyncIterator[Any]]:
            self._providers[name] = factory
            return factory

        return register

    def resource(self, name: str, kind: type[T]) -> T:
        value = self._resources[name]
        if not isinstance(value, kind):
            raise TypeError(f"resource {name!r} is a {type(value).__name__}, not a {kind.__name__}")
        return value

    def current(self) -> Invocation:
        return Invocation(user_id=_user.get())

    @contextlib.asynccontextmanager
    async def running(self, name: str) -> AsyncIterator[Any]:
        """Start the provider ``name`` as the host's lifecycle would, and stop it afterwards."""
        generator = self._providers[name]()
        self._resources[name] = await generator.__anext__()
        try:
            yield self._resources[name]
        finally:
            del self._resources[name]
            with contextlib.suppress(StopAsyncIteration):
                await generator.__anext__()

    @contextlib.contextmanager
    def invocation(self, user_id: str) -> Iterator[None]:
        """Run the block as an invocation of ``user_id`` (``context.current().user_id``)."""
        token = _user.set(user_id)
        try:
            yield
        finally:
            _user.reset(token)

    def reset(self) -> None:
        self._providers.clear()
        self._resources.clear()


class Lifecycle:
    @staticmethod
    def resource(function: T) -> T:
        return function


def tool(function: T) -> T:
    return function


context = Context()
lifecycle = Lifecycle()
