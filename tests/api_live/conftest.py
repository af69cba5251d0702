"""Live tests: one gunicorn per session, started by the tests on a temporary everything."""

from collections.abc import Iterator

import pytest

from taskhoster.client import Client

from .live import LiveServer


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("live"))
    server.prepare()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def clients(live: LiveServer) -> dict[str, Client]:
    return {who: Client(live.url, token, timeout=15) for who, token in live.tokens.items()}
