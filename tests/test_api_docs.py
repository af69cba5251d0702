"""The API docs say how to get a token, that times are epoch milliseconds, a task's life, and
show real bodies: no free-form JSON left for Swagger to fill with `additionalProp1`."""

import orjson
import pytest

from queues.api.docs import COMPONENT_EXAMPLES, ITEM, PROPERTY_EXAMPLES

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(client) -> dict:
    response = client.get("/api/v1/schema/?format=json")
    assert response.status_code == 200
    return orjson.loads(response.content)


def test_the_description_covers_tokens_times_the_life_of_a_task_and_the_way_back(schema):
    text = schema["info"]["description"]
    assert "Authorization: Bearer th_" in text and "manage.py createtoken" in text
    assert "*API tokens*" in text  # the admin's page
    assert "epoch milliseconds" in text
    for state in ("pending", "processing", "finished", "failed", "cancelled"):
        assert f"**{state}**" in text
    assert "[← Back to the console](/)" in text


def free_form(schema: dict) -> bool:
    """A JSON value of any shape: Swagger invents `additionalProp1` or "string" for it."""
    return ("type" not in schema and "$ref" not in schema and "allOf" not in schema) or (
        schema.get("type") == "object" and "properties" not in schema
    )


def test_every_free_form_body_or_field_has_a_real_example(schema):
    components = schema["components"]["schemas"]
    for name, component in components.items():
        if name == "Error":
            continue
        for prop, field in component.get("properties", {}).items():
            if free_form(field):
                assert "example" in field, f"{name}.{prop} has no example"
    post = schema["paths"]["/api/v1/queues/{host}/{queue}/tasks"]["post"]
    assert post["requestBody"]["content"]["application/json"]["example"] == ITEM


def test_whole_body_examples_match_their_components(schema):
    components = schema["components"]["schemas"]
    for name, example in COMPONENT_EXAMPLES.items():
        assert name in components, f"no component {name} any more"
        assert components[name]["example"] == example
        fields = components[name]["properties"]
        assert set(example) <= set(fields), name
        assert set(components[name].get("required", ())) <= set(example), name
    for component, prop in PROPERTY_EXAMPLES:
        assert any(prop in c.get("properties", {}) for c in components.values()), prop
        assert component == "*" or prop in components[component]["properties"]
