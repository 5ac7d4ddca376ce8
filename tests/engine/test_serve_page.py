"""The web page at /: one static HTML + JS page with no build step and nothing fetched from
elsewhere, tested in a real headless browser (Debian's chromium through Selenium): ask a
question, wait for the answer, find the probabilities, the sources, the cost and the DAG.

The browser test needs `chromium` and `chromedriver` on PATH (Debian: apt-get install chromium
chromium-driver; `make install` does it when run as root) and selenium (the [dev] extra); it is
skipped, saying which is missing, only where they cannot be had. Its screenshot is saved under
$LOGICROUTE_TEST_ARTIFACTS (default: the test's tmp folder)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from engine.face.serve.app import PAGE_ASSETS, PAGE_DIR
from engine.face.serve.run import ServerThread
from tests.engine.serve_helpers import CHAIN_QUESTION, SchemaLLM, call, film_service

ANSWER = "Steven Spielberg, who directed Jaws, was born on December 18, 1946 [1]."


def test_the_page_and_its_assets_are_served_and_reach_nothing_outside(tmp_path, isolated_llm_env):
    with ServerThread(film_service(tmp_path)) as s:
        page = call("GET", f"{s.url}/")
        assert page.status == 200 and "<textarea" in page.body
        for name, kind in PAGE_ASSETS.items():
            r = call("GET", f"{s.url}/page/{name}")
            assert r.status == 200 and r.headers["content-type"].startswith(kind)
        assert call("GET", f"{s.url}/page/..%2Fapp.py").status == 404
    for f in [PAGE_DIR / "index.html", *(PAGE_DIR / n for n in PAGE_ASSETS)]:
        urls = set(re.findall(r"https?://[^\s\"'`)]+", f.read_text())) - {"http://www.w3.org/2000/svg"}
        assert urls == set(), f"{f.name} refers to {urls}: the machine may have no internet"


def chrome():
    """A headless chromium driven by Selenium, or a skip naming what is missing."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.skip("no chromium/chromedriver on PATH: apt-get install chromium chromium-driver (make install as root)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the [dev] extra)")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,1500"):
        options.add_argument(arg)  # --no-sandbox: CI runs the tests as root
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def artifacts_dir(tmp_path: Path) -> Path:
    d = Path(os.environ.get("LOGICROUTE_TEST_ARTIFACTS") or tmp_path)
    d.mkdir(parents=True, exist_ok=True)
    return d


def test_asking_on_the_page_shows_probabilities_answer_sources_cost_and_the_dag(tmp_path, isolated_llm_env):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser = chrome()
    try:
        with ServerThread(film_service(tmp_path, SchemaLLM(answer=ANSWER, delay=0.05))) as s:
            browser.get(s.url + "/")
            WebDriverWait(browser, 10).until(lambda b: "chunks" in b.find_element(By.ID, "health").text)
            browser.find_element(By.ID, "question").send_keys(CHAIN_QUESTION)
            Select(browser.find_element(By.ID, "route")).select_by_value("auto")
            browser.find_element(By.ID, "ask").click()
            WebDriverWait(browser, 30).until(lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-state"))
            assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-state") == "answered"

            probs = browser.find_elements(By.CSS_SELECTOR, "#probs .prob")
            assert [p.get_attribute("data-route") for p in probs] == ["chunk", "summary", "logic"]
            assert "chosen" in probs[2].get_attribute("class")  # the router picked logic
            assert browser.find_element(By.ID, "answer").text == ANSWER
            assert browser.find_element(By.ID, "route-taken").text == "logic"
            assert re.search(r"3 LLM calls, \d+\+\d+ tokens", browser.find_element(By.ID, "cost").text)
            sources = browser.find_elements(By.CSS_SELECTOR, "#sources li")
            assert len(sources) == 5 and "Jaws (film)" in sources[0].text
            steps = browser.find_elements(By.CSS_SELECTOR, "#progress li")
            assert len(steps) == 3 and steps[0].text.startswith("solve")  # streamed while it worked

            boxes = browser.find_elements(By.CSS_SELECTOR, "#dag svg g.node")
            assert [b.get_attribute("data-node") for b in boxes] == ["Q", "q1", "q2", "A"]
            assert len(browser.find_elements(By.CSS_SELECTOR, "#dag svg path.edge")) == 3  # Q->q1->q2->A
            nodes = browser.find_elements(By.CSS_SELECTOR, "#dag-nodes li")
            assert "Steven Spielberg" in nodes[0].text and "sources: [1] Jaws (film)" in nodes[0].text
            assert "December 18, 1946" in nodes[1].text

            shot = artifacts_dir(tmp_path) / "serve_page.png"
            browser.set_window_size(1100, browser.execute_script("return document.body.scrollHeight") + 40)
            assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    finally:
        browser.quit()
