"""The inbox in a real browser (headless Chromium through chromedriver), for InboxBrowserTests.

Reads one JSON object of inputs from argv[1], drives the pages, and prints one JSON object:
{"<check>": {"ok": true|false, "detail": "..."}, ...}. The Swift test judges each check; this
script only observes. Every wait is bounded (WebDriverWait), none is a sleep.
"""
import hashlib
import json
import os
import subprocess
import sys
import time

import backtracepython
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

given = json.loads(sys.argv[1])
base = given["base"]
results = {}


def note(check, ok, detail=""):
    results[check] = {"ok": bool(ok), "detail": str(detail)}


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = given.get("chromium", "/usr/bin/chromium")
    for flag in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,1000"]:
        options.add_argument(flag)
    options.add_experimental_option("prefs", {
        "download.default_directory": given["downloads"], "download.prompt_for_download": False,
    })
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(given.get("chromedriver", "/usr/bin/chromedriver")), options=options)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": given["downloads"]})
    return driver


def wait(driver, condition, seconds=10):
    return WebDriverWait(driver, seconds, poll_frequency=0.05).until(condition)


def reporthost(*words):
    return subprocess.run([given["reporthost"], *words, "--repository", given["repository"]],
                          capture_output=True, text=True, timeout=60)


driver = browser()
try:
    # 1. A report posted after the page opened appears without a reload, within 2 s.
    driver.get(base)
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#reports tr"))
    driver.execute_script("window.openedBefore = 'this page, not a reload';")
    sent = reporthost("report", "error", "--summary", "posted after the page opened", "--config", given["config"], "--print")
    posted = time.monotonic()
    new_id = json.loads(sent.stdout)["report_id"] if sent.returncode == 0 else None
    try:
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f'#reports tr[data-id="{new_id}"]'), seconds=2)
        seconds = time.monotonic() - posted
        same_page = driver.execute_script("return window.openedBefore") == "this page, not a reload"
        row = driver.find_element(By.CSS_SELECTOR, f'#reports tr[data-id="{new_id}"]')
        link = row.find_element(By.CSS_SELECTOR, "a").get_attribute("href")
        note("live", same_page and link.endswith("/reports/" + new_id),
             f"appeared {seconds:.2f} s after the post; same page: {same_page}; link {link}")
    except Exception as error:  # noqa: BLE001 - reported as the check's detail
        note("live", False, f"report {new_id} (exit {sent.returncode}: {sent.stderr[-300:]}) not listed within 2 s: {error!r}")

    # 2. A crash page shows the symbolicated frames.
    driver.get(f"{base}reports/{given['crash_id']}")
    stack = wait(driver, lambda d: d.find_element(By.ID, "stack")).text
    modules = driver.find_element(By.ID, "modules").find_element(By.TAG_NAME, "summary").text
    note("crash_stack", "crash: SIGSEGV" in stack and "#0 " in stack, stack)
    note("crash_modules", "modules, with their build ids" in modules, modules)

    # 3. The change trail names the plugin, and marks what it wrote in the final text.
    driver.get(f"{base}reports/{given['bug_id']}")
    trail = wait(driver, lambda d: d.find_element(By.ID, "trail")).text
    marks = driver.find_elements(By.CSS_SELECTOR, "#summary mark")
    marked = [(m.get_attribute("data-plugin"), m.text, m.get_attribute("title")) for m in marks]
    note("trail", "scrub-pii (handler.before) replaced" in trail and "of the summary" in trail and ("scrub-pii", "[email]", "scrub-pii (handler.before)") in marked,
         json.dumps({"trail": trail, "marks": marked}))

    # 3b. Breadcrumbs are a list, as `show` prints them; they are not one of the attachments.
    crumbs = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#breadcrumbs li")]
    note("breadcrumbs", bool(crumbs) and all(" [" in line and "] " in line for line in crumbs), json.dumps(crumbs))
    files = [a.get_attribute("data-name") for a in driver.find_elements(By.CSS_SELECTOR, "a.download")]
    note("attachments_apart", files == [given["attachment"]], json.dumps(files))

    # 3c. The list marks the reports a plugin changed, and only those.
    driver.get(base)
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f'#reports tr[data-id="{given["bug_id"]}"]'))
    marked_rows = [row.get_attribute("data-id") for row in driver.find_elements(By.CSS_SELECTOR, "#reports tr") if row.find_elements(By.CSS_SELECTOR, ".changed")]
    note("changed_marked", marked_rows == [given["bug_id"]], json.dumps(marked_rows))
    driver.get(f"{base}reports/{given['bug_id']}")
    wait(driver, lambda d: d.find_element(By.ID, "trail"))

    # 4. An attachment downloads with the same sha256.
    name = given["attachment"]
    driver.find_element(By.CSS_SELECTOR, f'a.download[data-name="{name}"]').click()
    target = os.path.join(given["downloads"], name)
    try:
        wait(driver, lambda d: os.path.exists(target) and not os.path.exists(target + ".crdownload"), seconds=20)
        with open(target, "rb") as file:
            digest = hashlib.sha256(file.read()).hexdigest()
        note("download", digest == given["sha256"], f"sha256 {digest}")
    except Exception as error:  # noqa: BLE001
        note("download", False, f"{target} never arrived: {error!r}; folder has {os.listdir(given['downloads'])}")

    # 5. A planted <script> (and an <img onerror>) in the summary creates no element and runs nothing.
    planted = driver.execute_script("""
        return {
          script: document.getElementById('planted') === null,
          img: document.getElementById('plantedimg') === null,
          inside: document.querySelectorAll('#summary script, #summary img, #summary iframe').length,
          ran: typeof window.plantedRan,
          text: document.getElementById('summary').textContent,
        };""")
    note("planted", planted["script"] and planted["img"] and planted["inside"] == 0 and planted["ran"] == "undefined"
         and "<script id=planted>" in planted["text"], json.dumps(planted))
    driver.get(base)
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#reports tr"))
    in_list = driver.execute_script(
        "return [document.querySelectorAll('#reports script, #reports img').length, typeof window.plantedRan]")
    note("planted_list", in_list == [0, "undefined"], json.dumps(in_list))

    # 6. Backtrace's official Python client lands in the inbox and reads like ReportHost's own.
    backtracepython.initialize(endpoint=base.rstrip("/"), token="local-token", disable_global_handler=True,
                               attributes={"release": "py-1"})
    backtracepython.send_report("sent by backtracepython")
    backtracepython.finalize()
    driver.get(base + "?q=sent+by+backtracepython")
    rows = wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#reports tr"), seconds=10)
    python_id = rows[0].get_attribute("data-id") if len(rows) == 1 else None
    pages = {}
    for label, report_id in [("python", python_id), ("reporthost", new_id)]:
        driver.get(f"{base}reports/{report_id}")
        summary = wait(driver, lambda d: d.find_element(By.ID, "summary")).text
        attributes = {row.find_elements(By.TAG_NAME, "td")[0].text: row.find_elements(By.TAG_NAME, "td")[1].text
                      for row in driver.find_elements(By.CSS_SELECTOR, "#attributes tr")}
        pages[label] = {"summary": summary, "id": driver.find_element(By.ID, "report-id").text,
                        "error.message": attributes.get("error.message"), "answers": driver.find_element(By.ID, "answers").text}
    note("python_client", pages["python"]["summary"] == "sent by backtracepython"
         and pages["python"]["error.message"] == "sent by backtracepython" and pages["python"]["id"] == python_id
         and pages["reporthost"]["summary"] == "posted after the page opened" and pages["reporthost"]["id"] == new_id
         and pages["python"]["answers"] == pages["reporthost"]["answers"] == "200", json.dumps(pages))

    # No page broke a Content-Security-Policy rule or threw.
    problems = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    note("console", not problems, json.dumps(problems))
finally:
    driver.quit()

print(json.dumps(results))
