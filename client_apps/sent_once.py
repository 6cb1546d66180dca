"""A value that Flower's Ray engine would pickle with every message, sent once through Ray's object store.

A user's federation in the ClientApp's closure travelled whole with every message (O(M^2) bytes per
exchange: docs/performance.md). :class:`SentOnce` pickles as a reference to one ``ray.put`` copy,
which each worker fetches once; without Ray it pickles as its value.
"""

from __future__ import annotations

import threading
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: The values this process fetched, by their object's id: each is fetched once per worker.
_FETCHED: dict[str, SentOnce[Any]] = {}
_LOCK = threading.Lock()


class SentOnce(Generic[T]):
    """Holds ``value``; pickled under Ray, it travels as a reference to one stored copy."""

    def __init__(self, value: T) -> None:
        self.value = value
        self._reference: Any = None

    def __reduce__(self) -> tuple[Any, ...]:
        reference = self._stored()
        return (SentOnce, (self.value,)) if reference is None else (_fetch, (reference,))

    def _stored(self) -> Any:
        """The object-store reference of the value (put on first use), or None when Ray is not running here."""
        try:
            import ray
        except ImportError:  # pragma: no cover - ray comes with flwr[simulation]
            return None
        if not ray.is_initialized():
            return None
        with _LOCK:  # Flower pickles from several threads at once: one copy
            if self._reference is None:
                self._reference = ray.put(self.value)
        return self._reference


def _fetch(reference: Any) -> SentOnce[Any]:
    """The value behind ``reference``, fetched from Ray's object store once per process."""
    import ray

    key = reference.hex()
    with _LOCK:
        if key not in _FETCHED:
            _FETCHED[key] = SentOnce(ray.get(reference))
        return _FETCHED[key]
