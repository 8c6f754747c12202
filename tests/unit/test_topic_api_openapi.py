"""``/openapi.json`` is generated from the routes and the TypedDicts of their answers.

Every route is documented with the path and parameters the route itself has; a route
without an ``@operation``, or with a path parameter nobody described, stops the generation;
TypedDicts become the OpenAPI 3.0 schemas the answers are checked against (schemathesis,
tests/integration/test_topic_api_schema.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import pytest
from starlette.responses import Response
from starlette.routing import Mount, Route

from topic_api.app import create_app
from topic_api.openapi.document import document
from topic_api.openapi.json_schema import Doc, Min, SchemaBook
from topic_api.openapi.operations import HTML_PAGE, operation
from topic_api.settings import ApiSettings


class Inner(TypedDict):
    n: Annotated[int, Min(0), Doc("how many")]


class Outer(TypedDict):
    name: str
    kind: Literal["a", "b"]
    inner: Inner | None
    items: list[Inner]
    extra: dict[str, Any]
    texts: dict[str, str]
    anything: Any | None
    later: NotRequired[float]


def test_typed_dicts_become_openapi_schemas() -> None:
    book = SchemaBook()
    book.publish([Outer, Inner], open_to_more=[Outer])
    inner = {
        "type": "object",
        "required": ["n"],
        "properties": {"n": {"type": "integer", "minimum": 0, "description": "how many"}},
        "additionalProperties": False,
    }
    assert book.components["Inner"] == inner
    outer = book.components["Outer"]
    assert outer["required"] == ["name", "kind", "inner", "items", "extra", "texts", "anything"]
    assert outer["additionalProperties"] is True
    assert outer["properties"] == {
        "name": {"type": "string"},
        "kind": {"type": "string", "enum": ["a", "b"]},
        "inner": {**inner, "nullable": True},  # inline: a $ref takes no nullable beside it
        "items": {"type": "array", "items": {"$ref": "#/components/schemas/Inner"}},
        "extra": {"type": "object", "additionalProperties": True},
        "texts": {"type": "object", "additionalProperties": {"type": "string"}},
        "anything": {"nullable": True},
        "later": {"type": "number"},
    }
    with pytest.raises(TypeError, match="no JSON schema"):
        book.schema(set[str])


def test_every_route_is_documented_with_its_own_path_and_methods(tmp_path: Path) -> None:
    app = create_app(ApiSettings.from_env({"PHRAME_MIRROR_DIR": str(tmp_path)}))
    spec = document(app.routes)
    routed: dict[str, set[str]] = {}
    for r in app.routes:
        if isinstance(r, Route):
            path = r.path.replace("{topic:path}", "{topic}")
            routed.setdefault(path, set()).update(m.lower() for m in (r.methods or ()) if m != "HEAD")
    assert {p: set(ops) for p, ops in spec["paths"].items()} == routed
    restart = spec["paths"]["/api/nodes/{node}/containers/{id}/restart"]["post"]
    assert [p["name"] for p in restart["parameters"]] == ["node", "id"]
    assert restart["security"] == [{"bearer": []}] and set(restart["responses"]) == {
        "202", "400", "401", "403", "404", "503"
    }  # fmt: skip
    assert spec["paths"]["/api/kv/{topic}"]["put"]["requestBody"]["required"] is True
    assert "security" not in spec["paths"]["/healthz"]["get"]  # public
    assert spec["components"]["schemas"]["Environment"]["required"].count("rollouts") == 0


async def undocumented(_: object) -> Response:
    return Response("")


@operation("a page", HTML_PAGE, access="public")
async def page(_: object) -> Response:
    return Response("")


def test_a_route_without_an_operation_or_with_an_undescribed_parameter_stops_the_generation() -> None:
    assert "/page" in document([Route("/page", page), Mount("/static", app=page)])["paths"]
    with pytest.raises(ValueError, match=r"/nothing .*has no @operation"):
        document([Route("/page", page), Route("/nothing", undocumented)])
    with pytest.raises(ValueError, match="path parameter 'who' has no description"):
        document([Route("/page/{who}", page)])
