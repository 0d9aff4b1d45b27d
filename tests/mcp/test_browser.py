"""The web view in a real browser: headless Chromium driven over WebDriver.

Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them
where missing) and the `selenium` package (tests/mcp/requirements.txt).
Without them every test here is skipped, and says why.
"""

import json
import os
import shutil
import time
from pathlib import Path

import httpx2
import pytest

from conftest import http_session, run, structured

pytestmark = pytest.mark.anyio

CHROMIUM = os.environ.get("DSTORE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = os.environ.get("DSTORE_CHROMEDRIVER") or shutil.which("chromedriver")

TYPES = ["strategy_choice", "implementation_choice", "tool_invocation", "resource_selection", "validation_response"]


@pytest.fixture
def browser():
    if not (CHROMIUM and DRIVER):
        pytest.skip("no chromium and chromedriver on PATH (Debian: chromium, chromium-driver)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("the selenium package is not installed (tests/mcp/requirements.txt)")
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"]:
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def console_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def until(check, seconds, what):
    """Polls `check` until it is true, for at most `seconds`; returns the time it took."""
    start = time.monotonic()
    while True:
        if check():
            return time.monotonic() - start
        if time.monotonic() - start > seconds:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.05)


def visible_rows(driver):
    return [a for a in driver.find_elements("css selector", "#tree a.row") if a.is_displayed()]


SHOWN_TEXTS = ("return Array.from(document.querySelectorAll('#tree a.row')).filter(a => !a.closest('li.hidden')"
               " && !a.closest('details:not([open]) > ul')).map(a => a.textContent)")


def shown_texts(driver) -> list[str]:
    """The text of each row shown, read in one step (the live update may replace the rows at any time)."""
    return driver.execute_script(SHOWN_TEXTS)


def write_plans(path: Path, plans: int, per_plan: int):
    """Decisions JSONL: `plans` plans of `per_plan` decisions, each a tree about 8 deep."""
    with path.open("w") as out:
        for p in range(plans):
            plan = f"01K{p:023d}"
            for i in range(per_plan):
                ident = f"01J{p:06d}{i:017d}"
                parent = None if i == 0 else f"01J{p:06d}{(i - 1) // 3:017d}"
                out.write(json.dumps({
                    "decision_id": ident, "plan_id": plan, "parent_decision_id": parent, "sequence": i,
                    "decision_type": "prompt_definition" if i == 0 else TYPES[i % len(TYPES)],
                    "chosen_option": f"option {i} of plan {p}: {'redis cache' if i % 97 == 0 else 'plain step'}",
                    "rationale": "because", "confidence_score": (i % 10) / 10,
                }) + "\n")


async def test_pages_load_clean_and_the_outline_works(demo, serve, browser):
    server = serve(demo)
    base = server.web
    plan = max(httpx2.get(base + "api/plans").json(), key=lambda p: p["decisions"])["plan_id"]
    decision = httpx2.get(f"{base}api/plan/{plan}/tree").json()["roots"][0]["decision_id"]
    for path in ["", f"plan/{plan}", f"decision/{decision}", "stale", "calibration",
                 "context?focus=class%3A%2F%2FTokenBucket&budget=800"]:
        browser.get(base + path)
        assert browser.find_element("css selector", "h1").text, path
        assert console_errors(browser) == [], path

    browser.get(f"{base}plan/{plan}")
    assert len(visible_rows(browser)) == 13
    # Collapsing the root's children hides the rows below them.
    from selenium.webdriver.common.action_chains import ActionChains

    deep = browser.find_elements("css selector", "#tree details summary")[1]
    # A click on the summary beside its link (its right end) toggles it.
    ActionChains(browser).move_to_element_with_offset(deep, deep.size["width"] // 2 - 5, 0).click().perform()
    assert len(visible_rows(browser)) < 13
    browser.find_element("id", "expand").click()
    assert len(visible_rows(browser)) == 13
    browser.find_element("id", "collapse").click()
    assert len(visible_rows(browser)) == 1

    # Search: the matches and the decisions above them.
    browser.find_element("id", "expand").click()
    search = browser.find_element("id", "search")
    search.send_keys("redis")
    until(lambda: len(visible_rows(browser)) < 13, 2, "the search filters")
    shown = [a.text for a in visible_rows(browser)]
    assert any("Redis" in t for t in shown) and shown[0].startswith("prompt_definition"), shown
    search.clear()
    search.send_keys(" ")  # clear() sends no input event
    search.send_keys("\b")
    until(lambda: len(visible_rows(browser)) == 13, 2, "clearing the search shows every row")

    # Keyboard: j moves down, k up, Enter opens the decision.
    from selenium.webdriver.common.keys import Keys

    body = browser.find_element("css selector", "body")
    search.send_keys(Keys.ESCAPE)
    body.send_keys("jjjk")
    current = browser.find_element("css selector", "#tree a.row.current")
    assert current == visible_rows(browser)[1]
    href = current.get_attribute("href")
    body.send_keys(Keys.ENTER)
    until(lambda: browser.current_url == href, 5, "Enter opens the decision")
    assert console_errors(browser) == []


async def test_what_agents_record_appears_on_an_open_plan(store, serve, browser):
    server = serve(store)
    async with http_session(server.url) as s:
        root = structured(await s.call_tool("record_decision", {
            "decision_type": "prompt_definition", "chosen_option": "a plan being watched"}))
        browser.get(f"{server.web}plan/{root['plan_id']}")
        assert len(shown_texts(browser)) == 1
        structured(await s.call_tool("record_decision", {
            "plan_id": root["plan_id"], "parent_decision_id": root["decision_id"],
            "decision_type": "strategy_choice", "chosen_option": "<script>alert('x')</script> as text"}))
        took = until(lambda: len(shown_texts(browser)) == 2, 2, "the new decision on the open page")
    print(f"\nthe new decision appeared after {took:.2f} s")
    assert "<script>alert('x')</script> as text" in shown_texts(browser)[1]
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text
    assert console_errors(browser) == []


async def test_a_request_without_the_token_is_refused(demo, serve, browser, tmp_path):
    secret = tmp_path / "token"
    # base64's own characters: the printed link must carry them encoded.
    secret.write_text("browser+token/x==")
    # By default the token stays out of what a log would keep.
    hidden = serve(demo, "--token-file", secret)
    assert "browser" not in hidden.web and "?token=<the" in hidden.web
    server = serve(demo, "--token-file", secret, "--show-token")
    assert "browser%2Btoken%2Fx%3D%3D" in server.web
    bare = server.web.split("?")[0]
    browser.get(bare)
    assert "a bearer token is required" in browser.page_source
    browser.get(server.web)  # the URL printed at start: the token goes into a cookie
    assert browser.current_url == bare
    assert browser.find_element("css selector", "h1").text == "Plans"
    browser.get(bare + "stale")
    assert browser.find_element("css selector", "h1").text == "Stale decisions"
    # The cookie is out of scripts' reach.
    assert browser.execute_script("return document.cookie") == ""


async def test_a_large_store_and_a_5000_decision_plan(tmp_path, serve, browser):
    db = tmp_path / "large.db"
    decisions = tmp_path / "decisions.jsonl"
    write_plans(decisions, 20, 5000)
    run("import", db, decisions)
    server = serve(db)
    base = server.web
    timings = {}
    for name, path in [("plans (20 plans, 100,000 decisions)", ""),
                       ("a plan of 5,000 decisions", f"plan/01K{0:023d}")]:
        browser.get(base + path)
        nav = browser.execute_script("return performance.getEntriesByType('navigation')[0].toJSON()")
        timings[name] = (nav["domInteractive"], nav["loadEventEnd"])
        assert console_errors(browser) == [], path
    assert len(browser.find_elements("css selector", "#tree a.row")) == 5000
    for path in [f"decision/01J{0:06d}{4999:017d}", "stale", "calibration", "context"]:
        browser.get(base + path)
        assert browser.find_element("css selector", "h1").text, path
        assert console_errors(browser) == [], path
    browser.get(f"{base}plan/01K{0:023d}")
    # The search still answers on a plan this size.
    browser.find_element("id", "search").send_keys("redis")
    took = until(lambda: 0 < len(shown_texts(browser)) < 1000, 5, "the search on 5,000 decisions")
    for name, (interactive, loaded) in timings.items():
        print(f"\n{name}: interactive at {interactive:.0f} ms, loaded at {loaded:.0f} ms")
    print(f"search over 5,000 decisions: {took * 1000:.0f} ms")


async def test_the_first_hour_in_the_view(demo, serve, browser):
    """What a new user meets: plans by their goal, a search box that takes
    words, ids and PLAN#SEQ, the decision page read top down, the stale
    count the CLI gives, a focus that is not a node with the nearest names,
    and a redaction shown where the content was."""
    run("redact", demo, "01M6DQS9M0#2", "--fields", "rationale", "--reason", "pasted key", "--by", "alice")
    server = serve(demo)
    base = server.web
    browser.get(base)
    goals = [td.text for td in browser.find_elements("css selector", "td.goal")]
    assert "Add per-key rate limiting to the public API" in goals, goals

    def find(words):
        box = browser.find_element("name", "q")
        box.clear()
        box.send_keys(words + "\n")

    find("nothing like this")
    until(lambda: "No plan's goal holds" in browser.page_source, 10, "a filter that matches nothing says so")
    find("rate limiting")
    until(lambda: len(browser.find_elements("css selector", "td.goal")) == 1, 10, "the goal's words keep its plan")
    find("01M6DQS9M0#2")
    until(lambda: browser.current_url.endswith("/decision/01M6DQYSD0VS00000000000003"), 10, "PLAN#SEQ opens it")

    # Read top down: what was chosen and why, then the history, every field last and folded.
    text = browser.find_element("css selector", "body").text
    assert text.index("Token bucket per user") < text.index("rationale") < text.index("History"), text
    assert "pasted key" in text and "alice" in text, "the redaction is not shown"
    assert text.index("History") < text.index("Every field")
    assert not browser.find_element("css selector", "details.all-fields").get_attribute("open")
    assert console_errors(browser) == []

    # The stale page counts what `dstore stale` counts.
    cli = json.loads(run("stale", demo, "--format", "json", check=False).stdout)
    browser.get(base + "stale")
    summary = browser.find_element("css selector", "p.muted").text
    assert f"{len(cli['stale'])} stale, {len(cli['at_risk'])} at risk" in summary, summary

    # A focus that is not a node: the nearest names, not an empty page.
    browser.get(base + "context?focus=TokenBucket")
    error = browser.find_element("css selector", "p.error").text
    assert "nearest" in error and "class://TokenBucket" in error, error
