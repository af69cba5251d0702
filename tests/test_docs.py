"""The documentation a user reads first says what the code does: docs/api.md names every
endpoint and every refusal code, and every link between the docs leads to a file."""

import re
from pathlib import Path

import pytest
from django.urls import get_resolver

from queues.api.errors import DRF_CODES, STORE_STATUS

ROOT = Path(__file__).resolve().parent.parent
API_MD = ROOT / "docs" / "api.md"


def api_routes() -> list[str]:
    """Every route under /api/v1/ but the catch-all, written as api.md writes them."""
    [api] = [p for p in get_resolver().url_patterns if str(p.pattern) == ""]
    [v1] = [p for p in api.url_patterns if str(p.pattern) == "api/v1/"]
    routes = [str(p.pattern) for p in v1.url_patterns if p.name != "no-such-path"]
    return [re.sub(r"<str:(\w+)>", r"{\1}", r) for r in routes]


def test_api_md_documents_every_endpoint():
    text = API_MD.read_text()
    routes = api_routes()
    assert len(routes) >= 12
    for route in routes:  # in full, or as ".../tasks/{id}/cancel" below its queue
        tail = route.split("{queue}/")[-1]
        assert f"/api/v1/{route}`" in text or f".../{tail}`" in text, route


@pytest.mark.parametrize(
    "code", sorted({*STORE_STATUS, *(c for _, c in DRF_CODES)} - {"throttled"})
)
def test_api_md_documents_every_refusal_code(code):
    assert f"`{code}`" in API_MD.read_text()


def test_every_relative_link_in_the_docs_leads_to_a_file():
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).is_file(), f"{page.name} links to {target}"
    assert "(docs/api.md)" in (ROOT / "README.md").read_text()
    assert "(api.md)" in (ROOT / "docs" / "client.md").read_text()
