"""Check the built documentation site in a real headless browser (Debian's chromium and
chromium-driver, driven by selenium).

    python docs/check_site.py docs/_build/html [--screenshot front.png]

The site is served over HTTP on 127.0.0.1 (as a user's browser would load it), and from the
front page every page reachable by an internal link is opened.  It fails (exit 1, one line per
problem) when

* a page logs an error to the browser's console (a script that fails, a missing resource);
* an internal link points to a file the build did not write, or to an ``#anchor`` that the
  target page does not have;
* a page of the reference is not reachable from the front page;
* typing a function's name into the search box does not list that function's page.
"""
import argparse
import functools
import http.server
import shutil
import sys
import threading
import time
from collections import deque
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlsplit

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import WebDriverWait

# (name typed into the search box, the page a result must link to)
SEARCHES = [("hessian", "api/generated/tapegrad.hessian.html"),
            ("cross_entropy", "api/generated/tapegrad.nn.functional.cross_entropy.html")]
LINKS_AND_IDS = """
return [Array.from(document.querySelectorAll('a[href]'), a => a.href),
        Array.from(document.querySelectorAll('[id], a[name]'), e => e.id || e.name)];
"""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(root):
    """An HTTP server for ``root`` on a free port of 127.0.0.1, running in a thread."""
    handler = functools.partial(QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def browser():
    """Headless Chromium from the system's packages (no browser download)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium is None or driver is None:
        sys.exit("docs check: needs Debian's chromium and chromium-driver "
                 "(apt-get install -y chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--hide-scrollbars"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=options)


def console_errors(driver):
    return [entry["message"] for entry in driver.get_log("browser")
            if entry["level"] == "SEVERE"]


def crawl(driver, base, root):
    """Open every page reachable from the front page; return (pages seen, problems)."""
    problems, ids, links = [], {}, []
    todo, seen = deque(["index.html"]), {"index.html"}
    while todo:
        page = todo.popleft()
        driver.get(base + page)
        hrefs, page_ids = driver.execute_script(LINKS_AND_IDS)
        ids[page] = set(page_ids)
        problems += [f"{page}: console error: {message}" for message in console_errors(driver)]
        for href in hrefs:
            url, fragment = urldefrag(href)
            if not url.startswith(base):
                continue                              # an external link: not checked here
            target = unquote(urlsplit(url).path)[len(urlsplit(base).path):] or "index.html"
            if target.endswith("/"):
                target += "index.html"
            links.append((page, target, fragment))
            if target.endswith(".html") and target not in seen and (root / target).is_file():
                seen.add(target)
                todo.append(target)
    for page, target, fragment in links:
        if not (root / target).is_file():
            problems.append(f"{page}: broken link to {target}")
        elif fragment and target in ids and unquote(fragment) not in ids[target]:
            problems.append(f"{page}: link to {target}#{fragment}: no such anchor")
    return seen, problems


def check_search(driver, base):
    """Type each name into the front page's search box and look for its page in the results."""
    problems = []
    for name, expected in SEARCHES:
        driver.get(base + "index.html")
        box = driver.find_element(By.CSS_SELECTOR, "form[action*='search'] input[name='q']")
        if not box.is_displayed():            # a narrow window hides the sidebar's search box
            driver.execute_script("arguments[0].scrollIntoView()", box)
        box.send_keys(name, Keys.ENTER)
        try:
            WebDriverWait(driver, 30).until(ready.presence_of_element_located(
                (By.CSS_SELECTOR, "#search-results ul.search li a")))
        except TimeoutException:
            problems.append(f"search for {name!r}: no results within 30 s")
            continue
        results = [a.get_attribute("href") for a in
                   driver.find_elements(By.CSS_SELECTOR, "#search-results ul.search li a")]
        if not any(urldefrag(r)[0] == base + expected for r in results):
            problems.append(f"search for {name!r}: {expected} not among {len(results)} results")
        problems += [f"search page: console error: {m}" for m in console_errors(driver)]
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path, help="the built HTML, e.g. docs/_build/html")
    parser.add_argument("--screenshot", type=Path, help="write a PNG of the front page here")
    args = parser.parse_args()
    root = args.site.resolve()
    if not (root / "index.html").is_file():
        sys.exit(f"docs check: no index.html in {root}: build the site first")

    start = time.perf_counter()
    server = serve(root)
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    driver = browser()
    try:
        if args.screenshot:    # first: a search leaves its terms highlighted on later pages
            driver.get(base + "index.html")
            args.screenshot.parent.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(args.screenshot))
        pages, problems = crawl(driver, base, root)
        written = {str(p.relative_to(root)) for p in root.rglob("*.html")}
        unreachable = sorted(p for p in written - pages
                             if p.startswith(("api/", "notebooks/")) or "/" not in p)
        problems += [f"{p}: not reachable by links from the front page" for p in unreachable
                     if p not in ("search.html", "genindex.html", "py-modindex.html")]
        problems += check_search(driver, base)
    finally:
        driver.quit()
        server.shutdown()
    for problem in problems:
        print("docs check:", problem)
    print(f"docs check: {len(pages)} pages opened in Chromium, {len(SEARCHES)} searches, "
          f"{len(problems)} problems, {time.perf_counter() - start:.0f} s")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
