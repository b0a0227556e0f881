"""Every response carries the security headers: a Content-Security-Policy that runs this site's
own scripts and styles only and forbids framing, X-Frame-Options DENY, nosniff and a same-origin
Referrer-Policy; pages, the API, static files, downloads, redirects and errors (a 500 too). The
templates hold nothing the policy would block (inline script, style or event handler)."""

from __future__ import annotations

import re
from pathlib import Path

from evalstore.web import headers
from tests.http.conftest import World, client_for

EXPECTED = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}
TEMPLATES = Path(headers.__file__).parent / "templates"


def test_every_kind_of_response_carries_the_security_headers(world: World) -> None:
    with client_for(world.engine, raise_errors=False, max_upload_bytes=1000) as client:

        @client.app.get("/boom")  # type: ignore[attr-defined,untyped-decorator]
        def boom() -> None:
            raise RuntimeError("a bug")

        answers = {
            "page": client.get("/tasks/open"),
            "page error": client.get("/tasks/nope"),
            "sign-in redirect": client.get("/runs/red-open", follow_redirects=False),
            "API": client.get("/api/v1/tasks/open/leaderboard"),
            "API error": client.get("/api/v1/runs/nope", headers=world.headers("red")),
            "download": client.get("/tasks/open/leaderboard.csv"),
            "static": client.get("/static/style.css"),
            "no such route": client.get("/no/such/thing"),
            "upload too large": client.post("/api/v1/runs", content=b"x" * 2000, headers=world.headers("admin")),
            "500": client.get("/boom"),
        }
    statuses = {what: response.status_code for what, response in answers.items()}
    assert statuses == {
        "page": 200,
        "page error": 404,
        "sign-in redirect": 303,
        "API": 200,
        "API error": 404,
        "download": 200,
        "static": 200,
        "no such route": 404,
        "upload too large": 413,
        "500": 500,
    }
    wrong = {
        (what, name): response.headers.get(name)
        for what, response in answers.items()
        for name, value in EXPECTED.items()
        if response.headers.get(name) != value
    }
    assert wrong == {}


def test_the_api_documentation_is_served_from_this_site_only(world: World) -> None:
    """Swagger UI's files come from the service (the page works offline, trusts no CDN), started
    by a static script: no inline script, and a policy allowing this site's scripts only."""
    with client_for(world.engine) as client:
        docs = client.get("/api/v1/docs")
        assets = re.findall(r'(?:src|href)="([^"]+)"', docs.text)
        fetched = {path: client.get(path) for path in assets}
        init = client.get("/static/swagger-init.js")
    assert docs.status_code == 200
    assert assets == [
        "/static/swagger-ui/swagger-ui.css",
        "/static/swagger-ui/favicon-32x32.png",
        "/static/swagger-ui/swagger-ui-bundle.js",
        "/static/swagger-init.js",
    ]
    assert {path: r.status_code for path, r in fetched.items()} == dict.fromkeys(assets, 200)
    assert "SwaggerUIBundle" in fetched["/static/swagger-ui/swagger-ui-bundle.js"].text
    assert "SwaggerUIBundle(" in init.text and 'data-openapi="/api/v1/openapi.json"' in docs.text
    assert "http" not in docs.text.replace("http-equiv", "")  # no external address at all
    assert re.search(r"<script(?![^>]*\bsrc=)[^>]*>", docs.text) is None  # no inline script
    policy = docs.headers["content-security-policy"]
    (script_sources,) = re.findall(r"script-src ([^;]+);", policy)
    assert script_sources == "'self'"
    assert "http" not in policy and "cdn" not in policy
    assert "frame-ancestors 'none'" in policy and docs.headers["x-frame-options"] == "DENY"


def test_the_api_reference_is_served_from_this_site_only(world: World) -> None:
    """ReDoc's bundle is this package's own file (the page works offline, trusts no CDN), started
    by a static script, under a policy allowing this site's scripts only."""
    with client_for(world.engine) as client:
        reference = client.get("/api/v1/redoc")
        assets = re.findall(r'(?:src|href)="([^"]+)"', reference.text)
        fetched = {path: client.get(path) for path in assets}
        licence = client.get("/static/redoc/LICENSE")
    assert reference.status_code == 200
    assert assets == ["/static/redoc/redoc.standalone.js", "/static/redoc-init.js"]
    assert {path: r.status_code for path, r in fetched.items()} == dict.fromkeys(assets, 200)
    assert "Redoc.init(" in fetched["/static/redoc-init.js"].text
    assert len(fetched["/static/redoc/redoc.standalone.js"].content) > 500_000  # the bundle, not a stub
    assert licence.status_code == 200 and "Rebilly" in licence.text
    assert 'data-openapi="/api/v1/openapi.json"' in reference.text
    assert "http" not in reference.text  # no external address at all
    assert re.search(r"<script(?![^>]*\bsrc=)[^>]*>", reference.text) is None  # no inline script
    policy = reference.headers["content-security-policy"]
    (script_sources,) = re.findall(r"script-src ([^;]+);", policy)
    assert script_sources == "'self'"
    assert "http" not in policy and "cdn" not in policy
    assert "frame-ancestors 'none'" in policy and reference.headers["x-frame-options"] == "DENY"


def test_the_templates_hold_nothing_the_policy_blocks() -> None:
    found = {}
    for template in sorted(TEMPLATES.glob("*.html")):
        text = template.read_text()
        blocked = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>|<style\b|\sstyle=|\son[a-z]+=|javascript:", text)
        if blocked:
            found[template.name] = blocked
    assert found == {}
    assert len(list(TEMPLATES.glob("*.html"))) > 15
