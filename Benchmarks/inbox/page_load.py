"""Loads two inbox pages in headless Chromium, alternating, and prints each one's median time
from navigation to the list's rows drawn: `many_ms X` and `one_ms Y` (scripts/bench's
inbox-page figure). Usage: page_load.py URL_MANY URL_ONE LOADS"""
import statistics
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

many, one, loads = sys.argv[1], sys.argv[2], int(sys.argv[3])
options = webdriver.ChromeOptions()
options.binary_location = "/usr/bin/chromium"
for flag in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"]:
    options.add_argument(flag)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
times = {many: [], one: []}
try:
    for index in range(loads * 2):
        url = (many, one)[index % 2] if (index // 2) % 2 == 0 else (one, many)[index % 2]
        start = time.perf_counter()
        driver.get(url)
        WebDriverWait(driver, 30, poll_frequency=0.005).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "#reports tr") and d.find_element(By.ID, "page").text)
        times[url].append((time.perf_counter() - start) * 1000)
finally:
    driver.quit()
print(f"many_ms {statistics.median(times[many]):.2f}")
print(f"one_ms {statistics.median(times[one]):.2f}")
