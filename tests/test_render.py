"""The rendered book in headless Chromium: math typeset, figures loaded, Colab buttons right.

Needs `make book` first (the Makefile's `test` target builds it) and Debian's chromium and
chromium-driver (`make browser` installs them). Saves screenshots under _build/.
"""

import re
import shutil
import time
from pathlib import Path

import pytest
from loopback import serve_directory

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
pytestmark = pytest.mark.render

PAGES = {
    # page: (has math, has figures, notebook behind it)
    "book/intro.html": (True, False, None),
    "book/data.html": (False, True, "book/data.ipynb"),
    "book/toolkit.html": (True, True, "book/toolkit.ipynb"),
    "book/dgp.html": (True, True, "book/dgp.ipynb"),
    "book/performance.html": (True, True, "book/performance.ipynb"),
    "book/reproduces.html": (False, False, "book/reproduces.ipynb"),
}


@pytest.fixture(scope="module")
def site():
    if not (HTML / "book" / "intro.html").exists():
        pytest.fail("the book is not built: run `make book` first")
    with serve_directory(HTML) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not chromium or not driver_path:
        pytest.fail(
            "chromium and chromedriver are needed: `make browser` (Debian: chromium "
            "chromium-driver)"
        )
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,1600",
    ):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=opts)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def wait_for(driver, script: str, timeout: float = 30.0):
    end = time.time() + timeout
    while time.time() < end:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.2)
    return driver.execute_script(script)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_renders(site, browser, page):
    has_math, has_figures, notebook = PAGES[page]
    browser.get(site + page)
    scripts = browser.execute_script("return [...document.scripts].map(s => s.src).filter(Boolean)")
    mathjax = [s for s in scripts if "mathjax" in s.lower() or "tex-" in s]
    assert all(s.startswith(site) for s in mathjax), f"MathJax must be served locally: {mathjax}"
    if has_math:
        assert mathjax, "a page with math must load MathJax"
        # MathJax 3 replaces each formula by an <mjx-container>; raw TeX must not remain
        typeset = wait_for(
            browser,
            "return window.MathJax && MathJax.startup && MathJax.startup.document"
            " && document.querySelectorAll('mjx-container').length",
        )
        assert typeset and typeset > 0, "no typeset math on the page"
        errors = browser.execute_script("return document.querySelectorAll('mjx-merror').length")
        assert errors == 0, "MathJax reported errors"
    if has_figures:
        images = browser.execute_script(
            "return [...document.querySelectorAll('.cell_output img')].map(i => [i.src, "
            "i.complete, i.naturalWidth])"
        )
        assert images, "no figures on the page"
        broken = [src for src, done, width in images if not (done and width > 0)]
        assert not broken, f"figures that did not load: {broken}"
    links = browser.execute_script("return [...document.querySelectorAll('a')].map(a => a.href)")
    colab = [h for h in links if "colab.research.google.com" in h]
    if notebook:
        assert colab and all(h.endswith("/" + notebook) for h in colab), colab
    shot = ROOT / "_build" / f"screenshot-{Path(page).stem}.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000


def test_the_scorecard_and_the_glued_numbers_render(site, browser):
    browser.get(site + "book/reproduces.html")
    rows = browser.execute_script(
        "return document.querySelectorAll('table.scorecard tbody tr').length"
    )
    assert rows >= 60, f"the scorecard shows {rows} records"
    for page in ("book/darn.html", "book/partition.html", "book/dgp.html", "book/nram.html"):
        browser.get(site + page)
        text = browser.execute_script("return document.body.innerText")
        unrendered = re.findall(
            r"\{(?:glue:text|paper|setting)\}`[^`]*`", text
        )  # a role left as text
        assert not unrendered, (page, unrendered[:5])
        assert (
            browser.execute_script("return document.querySelectorAll('table.scorecard').length")
            == 1
        ), page


OVERFLOW = """
const wide = [];
const over = (el, room) => el.scrollWidth > room + 1;
for (const pre of document.querySelectorAll('main div.highlight pre, main div.cell_output pre')) {
  if (over(pre, pre.clientWidth)) {
    const line = pre.innerText.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), '');
    const kind = pre.closest('.cell_output') ? 'output' : 'code';
    wide.push([kind, pre.scrollWidth, pre.clientWidth, line.slice(0, 80)]);
  }
}
for (const m of document.querySelectorAll('main mjx-container[display="true"]')) {
  const drawn = m.firstElementChild ? m.firstElementChild.getBoundingClientRect().width : 0;
  const room = m.getBoundingClientRect().width;
  if (drawn > room + 1) {
    const items = MathJax.startup.document.getMathItemsWithin(m);
    wide.push(['equation', Math.round(drawn), Math.round(room),
               items.length ? items[0].math.slice(0, 80) : '']);
  }
}
for (const t of document.querySelectorAll('main table')) {
  if (over(t, t.parentElement.clientWidth)) {
    wide.push(['table', t.scrollWidth, t.parentElement.clientWidth, t.innerText.slice(0, 80)]);
  }
}
return wide;
"""


def book_pages():
    return sorted(p.relative_to(HTML).as_posix() for p in (HTML / "book").glob("*.html"))


@pytest.mark.parametrize("page", book_pages() or ["book/intro.html"])
def test_nothing_is_wider_than_the_column(site, browser, page):
    """At 1280 px: no code cell, printed output, display equation or table wider than the text
    column."""
    browser.get(site + page)
    wait_for(
        browser,
        "return !document.querySelector('.math') || (window.MathJax && MathJax.startup"
        " && MathJax.startup.document && document.querySelectorAll('mjx-container').length)",
    )
    time.sleep(0.5)  # MathJax's layout of the last formulas
    wide = browser.execute_script(OVERFLOW)
    assert not wide, "\n".join(f"{k}: {w} px in {room} px: {what!r}" for k, w, room, what in wide)


def test_references_are_labelled_by_author_and_year():
    """The references list uses the labels of the citations in the text ("Gregor et al. 2014")."""
    text = (HTML / "book" / "references.html").read_text()
    labels = re.findall(r'<span class="label"><span class="fn-bracket">\[</span>(.*?)<', text)
    assert len(labels) >= 20, labels
    bad = [lab for lab in labels if not re.fullmatch(r"\D+ (\d{4})[a-z]?", lab)]
    assert not bad, bad


def test_equation_numbers_are_per_section_and_never_an_integer():
    """Every numbered display reads "(section.k)" (tools/eqnumbers.py), on the page and in every
    reference, so that none can be taken for a paper's "(15)"; each page counts from its own
    sections."""
    numbers = {}
    for page in sorted((HTML / "book").glob("*.html")):
        text = page.read_text()
        shown = re.findall(r'<span class="eqno">\((.*?)\)', text)
        cited = re.findall(r'href="[^"]*#equation-[^"]*">\((.*?)\)</a>', text)
        bad = [n for n in shown + cited if not re.fullmatch(r"\d+\.\d+", n)]
        assert not bad, f"{page.name}: equation numbers {bad}"
        if shown:
            numbers[page.stem] = shown
    assert {"darn", "partition", "ebp", "nram", "dgp"} <= set(numbers), sorted(numbers)
    assert all(shown[0] == "1.1" for shown in numbers.values()), numbers


INFO = (
    "document.querySelector('#scorecard-search').closest('.dt-container')"
    ".querySelector('.dt-info').innerText"
)
SEARCH = f"""
const inputs = Array.from(document.querySelectorAll('#scorecard-search thead input'));
return {{info: {INFO}, column: inputs.findIndex(i => i.placeholder === 'Status')}};
"""


def _entries(info: str) -> int:
    """The number of rows DataTables says it shows after filtering ("... of 17 entries ...")."""
    return int(re.search(r"of ([\d,]+) entries", info).group(1).replace(",", ""))


def test_the_searchable_scorecard_filters_sorts_links_and_works_offline(site, browser):
    for url in (site + "book/reproduces.html", (HTML / "book" / "reproduces.html").as_uri()):
        browser.get(url)  # served, and from the file system (offline)
        assert wait_for(
            browser, "return document.querySelector('#scorecard-search.dataTable') !== null"
        ), f"the searchable scorecard did not start at {url}"
        static = browser.execute_script(
            "return Array.from(document.querySelectorAll('table.scorecard tbody tr'))"
            ".map(tr => tr.cells[6].innerText)"
        )
        state = browser.execute_script(SEARCH)
        assert _entries(state["info"]) == len(static), state  # every record, once
        status = state["column"]
        browser.execute_script(
            "const i = document.querySelectorAll('#scorecard-search thead input')[arguments[0]];"
            "i.value = arguments[1]; i.dispatchEvent(new Event('input', {bubbles: true}));"
            "i.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true}));",
            status,
            "not run",
        )
        want = sum(s.startswith("not run") for s in static)
        assert wait_for(browser, f"return {INFO}.includes('of {want} entries')"), (
            browser.execute_script(SEARCH),
            want,
        )
    # sorting by the gap, in units of the tolerance (the records without one, as "not run", read
    # NaN): all the rows on one page, then click its heading, twice
    browser.execute_script(
        "const i = document.querySelectorAll('#scorecard-search thead input')[arguments[0]];"
        "i.value = ''; i.dispatchEvent(new Event('input', {bubbles: true}));"
        "i.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true}));",
        status,
    )
    browser.execute_script(
        "const s = document.querySelector('#scorecard-search').closest('.dt-container')"
        ".querySelector('.dt-length select');"
        "s.value = '150'; s.dispatchEvent(new Event('change', {bubbles: true}));"
    )
    gap = browser.execute_script(
        "return Array.from(document.querySelectorAll('#scorecard-search thead input'))"
        ".findIndex(i => i.placeholder === 'Gap')"
    )
    read = (
        "return Array.from(document.querySelectorAll('#scorecard-search tbody tr'))"
        f".map(tr => parseFloat(tr.cells[{gap}].innerText)).filter(v => !isNaN(v))"
    )
    for direction in ("ascending", "descending"):
        browser.execute_script(
            "document.querySelectorAll('#scorecard-search thead th')[arguments[0]]"
            ".querySelector('.dt-column-order').click()",
            gap,
        )
        time.sleep(0.5)
        values = browser.execute_script(read)
        assert values and values == sorted(values, reverse=direction == "descending"), values
    links = browser.execute_script(
        "return Array.from(document.querySelectorAll('#scorecard-search tbody a'))"
        ".map(a => a.getAttribute('href'))"
    )
    assert links and all(re.fullmatch(r"[a-z_]+\.html#[-a-z0-9]+", h) for h in links), links[:5]
