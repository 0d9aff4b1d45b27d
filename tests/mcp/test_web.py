"""The web view of `dstore serve` and `dstore ui`: pages, the JSON API, and its guards.

Driven over HTTP here (what a browser is sent); every test of a store runs
on a file and on the throwaway PostgreSQL server.
"""

import json
import re

import httpx2
import pytest

from conftest import http_session, run, structured

pytestmark = pytest.mark.anyio

HOSTILE_OPTION = "<script>alert('option')</script>"
HOSTILE_RATIONALE = '"><img src=x onerror=alert(1)>'


def get(url, **kw):
    return httpx2.get(url, timeout=30, follow_redirects=False, **kw)


def links(html: str) -> list[str]:
    return re.findall(r'href="(/[^"]*)"', html)


def first_plan(base) -> dict:
    plans = get(base + "api/plans").json()
    return max(plans, key=lambda p: p["decisions"])


async def test_every_page_loads_and_says_what_it_shows(demo, serve):
    server = serve(demo)
    base = server.web
    plan = first_plan(base)["plan_id"]
    tree = get(f"{base}api/plan/{plan}/tree").json()
    decision = tree["roots"][0]["children"][2]["decision_id"]  # a corrected strategy choice
    pages = {
        "": ["Plans", plan, "strategy_choice 3"],
        f"plan/{plan}": ["13 decisions, 10 standing", "corrected by #3", "superseded by", 'id="search"'],
        f"plan/{plan}?effective=1": ["Show every decision"],
        f"decision/{decision}": ["Correction chain", "What stands now", "Context snapshot", "rationale"],
        "stale": ["stale", "At risk"],
        "calibration": ["Brier", "ECE", "By type", "By phase", 'src="/api/calibration.svg"'],
        "context": ["Focus", "Budget"],
        "context?focus=class%3A%2F%2FTokenBucket&budget=600": ["fragments from", "TokenBucket", "<svg", "<line "],
    }
    for path, says in pages.items():
        r = get(base + path)
        assert r.status_code == 200, (path, r.status_code, r.text[:300])
        assert r.headers["content-type"].startswith("text/html")
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp, csp
        assert r.headers["x-content-type-options"] == "nosniff"
        # No inline script: every script element loads from this origin.
        assert re.findall(r"<script(?![^>]*\bsrc=)", r.text) == [], path
        for text in says:
            assert text in r.text, (path, text)
        # Every link of the page leads somewhere.
        for href in set(links(r.text)):
            assert get(base + href.lstrip("/")).status_code == 200, (path, href)
    assert get(base + "assets/app.js").headers["content-type"].startswith("text/javascript")
    assert get(base + "api/calibration.svg").text.lstrip().startswith("<svg")
    # What is not there says so, as a page.
    assert get(base + "plan/01M8NPMYVYT74S49A04YCJKAPZ").status_code == 404
    assert get(base + "decision/not-an-id").status_code == 400
    assert get(base + "no/such/page").status_code == 404
    bad = get(base + "context?focus=class%3A%2F%2FNoSuchThing")
    assert bad.status_code == 400 and "class://NoSuchThing is not a node of the graph" in bad.text


async def test_the_api_serves_the_clis_documents(demo, serve):
    server = serve(demo)
    base = server.web
    plan = first_plan(base)["plan_id"]
    decision = get(f"{base}api/plan/{plan}/tree").json()["roots"][0]["decision_id"]
    same = {
        "api/plans": ["plans", demo, "--format", "json"],
        f"api/plan/{plan}/tree": ["tree", demo, plan, "--format", "json"],
        f"api/plan/{plan}/tree?effective=1": ["tree", demo, plan, "--effective", "--format", "json"],
        f"api/decision/{decision}": ["show", demo, decision, "--format", "json"],
        "api/stale": ["stale", demo, "--format", "json"],
        "api/calibration": ["calibration", demo, "--format", "json"],
        "api/calibration?by=type": ["calibration", demo, "--by", "type", "--format", "json"],
    }
    for path, args in same.items():
        r = get(base + path)
        assert r.status_code == 200, (path, r.text)
        assert r.headers["content-type"] == "application/json"
        assert r.text == run(*args, check=False).stdout, path
    assert get(base + "api/calibration?by=colour").status_code == 400
    assert get(base + "api/decision/01M8NPMYVYT74S49A04YCJKAPZ").status_code == 404
    assert get(base + "api/plan/01M8NPMYVYT74S49A04YCJKAPZ/tree").status_code == 404
    assert get(base + "api/plan/01M8NPMYVYT74S49A04YCJKAPZ/count").status_code == 404
    assert get(base + "api/plan/not-a-plan/count").status_code == 400


async def test_stored_text_is_shown_as_text(store, serve):
    server = serve(store)
    async with http_session(server.url) as s:
        root = structured(await s.call_tool("record_decision", {
            "decision_type": "prompt_definition", "chosen_option": HOSTILE_OPTION,
            "rationale": HOSTILE_RATIONALE}))
    base = server.web
    for path in ["", f"plan/{root['plan_id']}", f"decision/{root['decision_id']}"]:
        html = get(base + path).text
        assert "<script>alert" not in html and "<img src=x" not in html, path
    plan_page = get(f"{base}plan/{root['plan_id']}").text
    assert "&lt;script&gt;alert(&#39;option&#39;)&lt;/script&gt;" in plan_page
    page = get(f"{base}decision/{root['decision_id']}").text
    assert "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    # The API hands the same text back whole, as JSON.
    shown = get(f"{base}api/decision/{root['decision_id']}").json()["decision"]
    assert (shown["chosen_option"], shown["rationale"]) == (HOSTILE_OPTION, HOSTILE_RATIONALE)


async def test_an_open_plan_sees_what_agents_record(store, serve):
    server = serve(store)
    async with http_session(server.url) as s:
        root = structured(await s.call_tool("record_decision", {
            "decision_type": "prompt_definition", "chosen_option": "watched plan"}))
        plan = root["plan_id"]
        base = server.web
        page = get(f"{base}plan/{plan}").text
        assert 'data-count="1"' in page
        assert get(f"{base}api/plan/{plan}/count").json() == {"decisions": 1}
        structured(await s.call_tool("record_decision", {
            "plan_id": plan, "parent_decision_id": root["decision_id"],
            "decision_type": "strategy_choice", "chosen_option": "recorded while watched"}))
    # What the page's script polls, and the outline it then fetches.
    assert get(f"{base}api/plan/{plan}/count").json() == {"decisions": 2}
    fragment = get(f"{base}plan/{plan}?fragment=tree")
    assert fragment.text.startswith('<ul class="tree">') and "recorded while watched" in fragment.text


async def test_the_token_comes_once_in_the_url_then_in_a_cookie(demo, serve, tmp_path):
    secret = tmp_path / "token"
    secret.write_text("s3cret-for-the-view\n")
    server = serve(demo, "--token-file", secret, "--show-token")
    assert server.web.endswith("/?token=s3cret-for-the-view")
    base = server.web.split("?")[0]
    assert get(base).status_code == 401
    assert get(base + "api/plans").status_code == 401
    assert get(base + "?token=wrong").status_code == 401
    assert get(base + "api/plans", headers={"Cookie": "dstore_token=wrong"}).status_code == 401
    opened = get(server.web)
    assert opened.status_code == 303 and opened.headers["location"] == "/"
    cookie = opened.headers["set-cookie"]
    assert cookie.startswith("dstore_token=s3cret-for-the-view;")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    # The token leaves the address; the rest of the query stays.
    kept = get(base + "?sort=plan&token=s3cret-for-the-view&desc=0")
    assert kept.headers["location"] == "/?sort=plan&desc=0"
    assert get(base, headers={"Cookie": "other=1; dstore_token=s3cret-for-the-view"}).status_code == 200
    assert get(base + "api/plans", headers={"Authorization": "Bearer s3cret-for-the-view"}).status_code == 200


async def test_other_sites_are_refused(demo, serve):
    base = serve(demo).web
    # A page of another site (its Origin), or one whose name was rebound to 127.0.0.1 (its Host).
    assert get(base + "api/plans", headers={"Origin": "http://evil.example"}).status_code == 403
    assert get(base + "api/plans", headers={"Host": "evil.example:7411"}).status_code == 403
    assert get(base + "api/plans", headers={"Host": "localhost:7411"}).status_code == 200
    r = get(base)
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]


async def test_the_view_alone_and_dstore_ui_have_no_way_to_write(demo, serve):
    alone = serve(demo, "--ui-only")
    assert alone.url is None
    base = alone.web
    assert get(base).status_code == 200
    assert httpx2.post(base + "mcp", json={}, timeout=30).status_code == 404
    ui = serve(demo, command="ui")
    assert ui.url is None
    before = run("digest", demo).stdout
    for method in ["POST", "PUT", "DELETE", "PATCH"]:
        for path in ["", "api/plans", "mcp", "plan/x"]:
            r = httpx2.request(method, ui.web + path, timeout=30)
            assert r.status_code in (404, 405), (method, path, r.status_code)
    assert run("digest", demo).stdout == before
    assert json.loads(get(ui.web + "api/plans").text)
