"""The rooms of the code and the arrows between them, read from every module's imports with ast
(no module is imported): an import that goes the wrong way, or modules that import each other
in a circle, fail here naming the import. Every module also opens with its one-line docstring.

docs/architecture.md draws the same arrows; change both together.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The project's own code; tests/ are left out (they may reach into any room).
PACKAGES = (
    "queues",
    "tasklogs",
    "webhooks",
    "schedules",
    "taskhoster",
    "taskhoster_site",
    "chaos",
    "soak",
    "bench",
    "fuzz",
    "scripts",
)
# Directories whose scripts import their neighbours by bare name (sys.path holds the directory).
SCRIPT_DIRS = ("bench", "chaos", "soak", "fuzz", "scripts")

# Which room a module lives in: the longest prefix that matches its dotted name. A module in
# none of them (a new file dropped flat into queues/) fails: give it a room.
ROOM_OF_PREFIX = {
    "queues.store": "store",
    "queues.store_pg": "store_pg",
    "queues.stores": "stores",
    "queues.services": "models",  # the configuration verbs over the models
    "queues.models": "models",
    "queues.validators": "models",
    "queues.migrations": "models",
    "queues.text": "text",
    "queues.monitor": "monitor",
    "queues.auth": "auth",
    "queues.api": "api",
    "queues.console": "console",
    "queues.metrics": "metrics",
    "queues.templatetags": "templatetags",
    "queues.web": "web",
    "queues.processes": "processes",
    "queues.admin": "admin",
    "queues.admin_forms": "admin",
    "queues.management": "commands",
    # where Django looks: the package, apps.py (its signals), urls.py (the app's URL root)
    "queues": "app",
    "queues.apps": "app",
    "queues.urls": "app",
    "tasklogs": "tasklogs",
    "webhooks": "webhooks",
    "schedules": "schedules",
    "taskhoster": "client",
    "taskhoster_site": "site",
    "chaos": "tools",
    "soak": "tools",
    "bench": "tools",
    "fuzz": "tools",
    "scripts": "tools",
}

# The arrows: the rooms each room may import (its own always). Read from the bottom up.
MAY_IMPORT: dict[str, set[str]] = {
    "store": set(),
    "store_pg": {"store"},
    "text": set(),
    "monitor": {"store", "store_pg"},
    "models": {"store"},
    "stores": {"store", "store_pg", "models", "text"},  # text: why a task waits, in words
    "auth": {"models"},
    "tasklogs": {"store", "store_pg", "stores", "models", "auth", "text", "monitor"},
    "schedules": {"store", "stores", "models"},
    "webhooks": {"store", "stores", "models", "monitor", "tasklogs"},
    "templatetags": {"text"},
    "console": {
        *("store", "stores", "models", "auth", "text", "templatetags"),
        *("tasklogs", "schedules", "webhooks"),  # their panels on the console's pages
    },
    "api": {"store", "store_pg", "stores", "models", "auth", "text", "monitor"},
    # /metrics: the stores' counts, Task Logs' events, the console's duration and worker queries
    # and the API's count of threads held waiting
    "metrics": {"store", "stores", "models", "console", "tasklogs", "api"},
    "web": set(),
    "processes": {"store", "stores", "models", "schedules", "webhooks"},
    "admin": {"store", "stores", "models", "auth", "text"},
    "commands": {"store", "store_pg", "stores", "models", "auth", "processes", "metrics"},
    "app": {"stores", "models", "console", "api"},
    "site": {"store", "api", "metrics"},  # the store's umask parser, the API's docs text, /metrics
    "client": set(),  # the client, worker and CLI ship without the server
    "tools": {*ROOM_OF_PREFIX.values()},  # benchmarks, chaos, soak and fuzz may use anything
}
# Rooms that import no Django (nor DRF): the store, the benchmarks and the ingester use them
# without it.
PLAIN_PYTHON = {"store", "store_pg", "monitor"}
DJANGO_MODULES = {"django", "rest_framework", "drf_spectacular"}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the project module it imports
    line: int

    def __str__(self) -> str:
        return f"{self.module} (line {self.line}) imports {self.target}"


def module_files() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = module_files()


def room_of(module: str) -> str:
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in ROOM_OF_PREFIX and (prefix != "queues" or module == "queues"):
            return ROOM_OF_PREFIX[prefix]
    raise AssertionError(f"{module} lies in no room: add it to ROOM_OF_PREFIX")


def imported_names(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every name an import statement of the module names, relative ones made absolute."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".") if is_package else module.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join([*here, *([node.module] if node.module else [])])
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno  # a submodule, or a name in base


def project_module(name: str, importer: str) -> str | None:
    """The project module an imported name resolves to, or None for the standard library's
    and third parties'."""
    first = name.split(".")[0]
    script_dir = importer.split(".")[0]
    if first not in PACKAGES and script_dir in SCRIPT_DIRS:
        sibling = f"{importer.rpartition('.')[0]}.{first}"
        if sibling in MODULES:
            return sibling
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def project_imports() -> list[Import]:
    found = set()
    for module, path in MODULES.items():
        for name, line in imported_names(module, path):
            target = project_module(name, module)
            if target and target != module:
                found.add(Import(module, target, line))
    return sorted(found, key=lambda i: (i.module, i.line, i.target))


IMPORTS = project_imports()


def wrong_way(imports: list[Import]) -> list[str]:
    wrong = []
    for found in imports:
        source, target = room_of(found.module), room_of(found.target)
        if source == target or target in MAY_IMPORT[source]:
            continue
        wrong.append(f"{found}: room {source} may not import room {target}")
    return wrong


def circles(arrows: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Each circle found by a depth-first walk of the graph the arrows draw, as a path that
    ends where it began."""
    graph: dict[str, set[str]] = {}
    for source, target in arrows:
        graph.setdefault(source, set()).add(target)
    done: set[str] = set()
    on_path: list[str] = []
    found_circles = []

    def walk(module: str) -> None:
        on_path.append(module)
        for target in sorted(graph.get(module, ())):
            if target in on_path:
                found_circles.append([*on_path[on_path.index(target) :], target])
            elif target not in done:
                walk(target)
        on_path.pop()
        done.add(module)

    for module in sorted(graph):
        if module not in done:
            walk(module)
    return found_circles


def test_every_module_lies_in_a_room_that_the_rules_know():
    for module in MODULES:
        assert room_of(module) in MAY_IMPORT, module


def module_arrows(imports: list[Import]) -> list[tuple[str, str]]:
    return [(found.module, found.target) for found in imports]


def test_the_arrows_between_rooms_go_one_way():
    arrows = [(a, b) for a, targets in MAY_IMPORT.items() for b in targets if a != b]
    assert circles((a, b) for a, b in arrows if a != "tools") == []
    assert [a for a, b in arrows if b == "tools"] == []  # nothing of the product needs them


def test_every_import_goes_the_way_of_the_arrows():
    assert wrong_way(IMPORTS) == []


def test_no_modules_import_each_other_in_a_circle():
    assert [" -> ".join(circle) for circle in circles(module_arrows(IMPORTS))] == []


def django_imports(module: str, path: Path) -> list[str]:
    return [
        f"{module} (line {line}) imports {name}"
        for name, line in imported_names(module, path)
        if name.split(".")[0] in DJANGO_MODULES
    ]


def test_the_plain_python_rooms_import_no_django():
    plain = {module: path for module, path in MODULES.items() if room_of(module) in PLAIN_PYTHON}
    assert [found for module, path in plain.items() for found in django_imports(module, path)] == []


def test_every_module_opens_with_its_one_line_docstring():
    missing = []
    for module, path in MODULES.items():
        docstring = ast.get_docstring(ast.parse(path.read_text(), str(path)))
        if not docstring or not docstring.splitlines()[0].strip():
            missing.append(str(path.relative_to(ROOT)))
    assert missing == []


# The checks above must be able to fail: each is shown a made-up wrong import.
@pytest.mark.parametrize(
    ("made_up", "expected"),
    [
        (Import("queues.store.paths", "queues.models", 1), "room store may not import room models"),
        (
            Import("queues.models", "queues.console.views", 1),
            "room models may not import room console",
        ),
        (Import("taskhoster.client", "queues.store", 1), "room client may not import room store"),
        (
            Import("queues.console.views", "bench.store_bench", 1),
            "room console may not import room tools",
        ),
    ],
)
def test_a_wrong_way_import_is_named(made_up, expected):
    assert wrong_way([made_up]) == [f"{made_up}: {expected}"]


def test_a_circle_is_found_and_named():
    made_up = [
        Import("queues.console.bulk", "queues.console.views", 1),
        Import("queues.console.views", "queues.console.bulk_steps", 2),
        Import("queues.console.bulk_steps", "queues.console.bulk", 3),
    ]
    assert circles(module_arrows(made_up)) == [
        [
            "queues.console.bulk",
            "queues.console.views",
            "queues.console.bulk_steps",
            "queues.console.bulk",
        ]
    ]


def test_a_django_import_is_named(tmp_path):
    made_up = tmp_path / "paths.py"
    made_up.write_text(
        '"""A made-up store module."""\n\n\ndef f():\n    from django.conf import settings\n'
    )
    assert django_imports("queues.store.paths", made_up) == [
        "queues.store.paths (line 5) imports django.conf.settings"
    ]


def test_a_module_dropped_flat_into_queues_has_no_room():
    with pytest.raises(AssertionError, match=r"queues\.newcomer lies in no room"):
        room_of("queues.newcomer")
    assert room_of("queues.stores.router") == "stores"  # the room h-stores is making
