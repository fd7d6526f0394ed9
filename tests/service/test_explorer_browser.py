"""The plan explorer end to end in a real headless Chromium (Debian's ``chromium``, driven by
Playwright for Python), against a planning service that requires a bearer token.

Set ``HYDRAULIS_EXPLORER_SCREENSHOT=docs/explorer.png`` to write the screenshot of README and docs/guide.md.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.conftest import SERVICE_TOKEN

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
EXAMPLE_PROPOSAL = Path(__file__).resolve().parents[2] / "examples" / "proposals" / "7b_32dev.json"
CHROMIUM_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic")
WAIT_MS = 180_000
FORM = {"#devices": "64", "#devices-per-node": "8", "#token-budget": "131072", "#max-seq-len": "16384",
        "#strategies": "4", "#time-limit": "1", "#docs": "3000"}


@pytest.fixture(scope="module")
def browser_page(planning_service, tmp_path_factory):
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed "
                                                                "(pip install -e '.[dev]')")
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: install Debian's chromium package "
                    "(apt-get install chromium), as .ci/run does")
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=str(CHROMIUM), headless=True,
            args=list(CHROMIUM_ARGS), viewport={"width": 1280, "height": 900})
        context.set_default_timeout(WAIT_MS)
        requested: list[str] = []
        context.on("request", lambda request: requested.append(request.url))
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{planning_service}/")
        yield page, requested, errors
        context.close()


def test_page_asks_for_the_token(browser_page):
    page, _, _ = browser_page
    page.wait_for_selector("#token-error:not(:empty)")
    assert "bearer token" in page.inner_text("#token-error")


def test_proposal_with_the_token_typed_in_the_page(browser_page, planning_service):
    page, requested, errors = browser_page
    page.fill("#token", SERVICE_TOKEN)
    page.press("#token", "Tab")
    page.wait_for_selector("#model option[value='llama-32b']", state="attached")
    page.wait_for_selector("#token-error:empty", state="attached")
    page.select_option("#model", "llama-32b")
    page.select_option("#device", "h100-80g")
    for selector, value in FORM.items():
        page.fill(selector, value)
    page.click("#propose")
    page.wait_for_selector("#proposal:not([hidden])")
    rows = page.locator("#strategies-table tbody tr")
    assert rows.count() >= 1
    assert "×(" in rows.first.inner_text() and "iB" in rows.first.inner_text()
    assert SERVICE_TOKEN not in page.url
    assert page.evaluate("localStorage.length + sessionStorage.length") == 0
    assert all(url.startswith(planning_service) or url.startswith("data:") for url in requested), requested
    assert not errors


def test_sampled_step_gantt_shows_each_operation(browser_page):
    page, _, errors = browser_page
    page.fill("#step-seed", "1")
    page.click("#sample-step")
    page.wait_for_selector("#step:not([hidden]) #gantt rect.op")
    contenders = page.locator("#contenders-table tbody tr")
    assert contenders.count() == 9
    assert "Megatron-LM style" in page.inner_text("#contenders-table") and "×" in contenders.nth(1).inner_text()
    page.hover("#gantt rect.op >> nth=0")
    details = page.locator("#op-details")
    details.wait_for(state="visible")
    assert "micro-batch 0" in details.inner_text() and "tokens" in details.inner_text()
    page.focus("#gantt")
    first = details.inner_text()
    page.keyboard.press("End")
    page.wait_for_function("text => document.getElementById('op-details').innerText !== text", arg=first)
    assert "Backward" in details.inner_text()
    screenshot = os.environ.get("HYDRAULIS_EXPLORER_SCREENSHOT")
    if screenshot:
        page.hover("#gantt rect.op.backward >> nth=1")
        page.screenshot(path=screenshot, full_page=True)
    assert not errors


def test_api_error_is_shown_next_to_the_field_it_names(browser_page):
    page, _, errors = browser_page
    page.fill("#max-seq-len", "1000000")
    page.fill("#token-budget", "2000000")
    page.click("#propose")
    page.wait_for_selector("#max-seq-len-error:not(:empty)")
    assert "longest sequence any scheme can hold" in page.inner_text("#max-seq-len-error")
    assert page.get_attribute("#max-seq-len", "aria-invalid") == "true"
    assert page.evaluate("document.activeElement.id") == "max-seq-len"
    assert page.inner_text("#form-error") == ""
    assert not errors


def test_a_bad_lengths_file_is_named_next_to_its_field(browser_page):
    page, _, errors = browser_page
    page.fill("#max-seq-len", "16384")
    page.check("input[name='lengths-source'][value='file']")
    page.set_input_files("#lengths-file", files=[{"name": "lengths.txt", "mimeType": "text/plain",
                                                  "buffer": b"# lengths\n300\nmany\n"}])
    page.click("#propose")
    page.wait_for_selector("#lengths-file-error:not(:empty)")
    assert page.inner_text("#lengths-file-error").startswith('lengths.txt:3: "many"')
    assert page.is_hidden("#docs")
    assert not errors


def test_memory_view_draws_a_bar_per_rank_class_of_a_bundled_proposal(browser_page):
    page, _, errors = browser_page
    page.select_option("#device", "h100-80g")
    page.set_input_files("#proposal-file", str(EXAMPLE_PROPOSAL))
    page.wait_for_selector("#memory-strategy option[value='7']", state="attached")
    assert page.locator("#strategies-table tbody tr").count() == 8 and page.is_hidden("#step-controls")
    page.select_option("#memory-strategy", "2")
    assert page.input_value("#memory-spec") == "1,8,1x4"
    page.click("#show-memory")
    page.wait_for_selector("#memory-chart svg g.class")
    bars = page.locator("#memory-chart svg g.class")
    assert bars.count() == 8 == page.locator("#memory-table tbody tr").count()
    for part in ("weights", "gradients", "optimizer", "route", "activations"):
        assert page.locator(f"#memory-chart g.class >> nth=0 >> rect.part.{part}").count() == 1
    assert page.locator("#memory-chart line.predicted").count() == 8
    assert page.locator("#memory-chart line.capacity").count() == 1
    assert page.inner_text("#memory-summary").startswith("llama-7b under 1,8,1x4 on 32 × h100-80g")
    assert "%" in page.locator("#memory-table tbody tr").first.inner_text()
    assert not errors


def test_memory_view_names_a_bad_spec_next_to_it(browser_page):
    page, _, errors = browser_page
    page.fill("#memory-spec", "1,8,1x5")
    page.click("#show-memory")
    page.wait_for_selector("#memory-spec-error:not(:empty)")
    assert "uses 40 devices, more than devices = 32" in page.inner_text("#memory-spec-error")
    assert page.get_attribute("#memory-spec", "aria-invalid") == "true"
    assert not errors


def test_the_default_proposal_is_bounded_by_work_budgets_not_the_time_limit(browser_page, planning_service):
    """With the form as it loads, the time limit is only a safety stop: the proposal's solver
    status is the integer programs' own, whatever the machine's speed."""
    page, _, errors = browser_page
    page.goto(f"{planning_service}/")
    page.fill("#token", SERVICE_TOKEN)
    page.press("#token", "Tab")
    page.wait_for_selector("#model option[value='llama-7b']", state="attached")
    page.wait_for_selector("#token-error:empty", state="attached")
    page.click("#propose")
    page.wait_for_selector("#proposal:not([hidden])")
    summary = page.inner_text("#proposal-summary")
    solver_status = re.search(r"solver (\w+) \(", summary).group(1)
    assert solver_status in {"optimal", "node_limit"}, summary  # the budgets' statuses, not time_limit
    assert not errors
