"""``Client``: the Python client of an icefloe cluster."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.flight as flight

from .errors import map_error


@contextmanager
def _mapped() -> Iterator[None]:
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - re-raised as a specific icefloe error
        mapped = map_error(exc)
        if mapped is exc:
            raise
        raise mapped from exc


class Client:
    """Talks to a head; reads data straight from the data nodes."""

    def __init__(self, head_uri: str, *, timeout_s: float = 60.0) -> None:
        self.head_uri = head_uri
        self._timeout_s = timeout_s
        self._head = flight.connect(head_uri)
        self._nodes: dict[str, flight.FlightClient] = {}

    def _options(self) -> flight.FlightCallOptions:
        return flight.FlightCallOptions(timeout=self._timeout_s)

    def _node(self, location: str) -> flight.FlightClient:
        client = self._nodes.get(location)
        if client is None:
            client = self._nodes[location] = flight.connect(location)
        return client

    def datasets(self) -> list[str]:
        """Names of the datasets the cluster holds."""
        with _mapped():
            infos = list(self._head.list_flights(options=self._options()))
        return sorted({info.descriptor.path[0].decode() for info in infos})

    def read(self, name: str) -> pa.Table:
        """Every row of dataset ``name`` as a table, in global row order."""
        with _mapped():
            infos = [
                info
                for info in self._head.list_flights(options=self._options())
                if info.descriptor.path[0].decode() == name
            ]
            if not infos:
                from .errors import NotFound

                raise NotFound(f"dataset '{name}' is not cached")
            tables = []
            for info in infos:
                for endpoint in info.endpoints:
                    reader = self._node(endpoint.locations[0].uri.decode()).do_get(
                        endpoint.ticket, options=self._options()
                    )
                    tables.append(reader.read_all())
        return pa.concat_tables(tables)

    def close(self) -> None:
        for client in [self._head, *self._nodes.values()]:
            client.close()
        self._nodes.clear()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
