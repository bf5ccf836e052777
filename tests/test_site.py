"""The course's website (issue 35), in English and Brazilian Portuguese (issue 46): ``gradacc site`` (``make site``)
builds both from the stored outputs with Jupyter Book 1, and a real browser reads every page of both.

Built once per session (a module fixture, into a temporary folder; CI's run is a fresh clone). Then Debian's chromium
(``test_browser.ensure_chromium``) driven by Playwright opens every HTML page from a local HTTP server, with every
request that is not to that server blocked and recorded: the site must need no CDN when viewed. Each page must render
(a title and its text), every image must load (figures at their real size: an output image is never scaled), every
math node must be typeset by the site's own MathJax, every internal link (and its #anchor) must resolve, and each
notebook page's Colab and Binder buttons and download link must point at that page's notebook. Sphinx's search must
find "micro-batch" on lesson 01's page. A screenshot of lesson 03's page (and of the memory explorer's figure) goes to
test-artifacts/.

The pt-BR site (``build/site/pt-BR/``, from ``pt-BR/``) gets the same checks, page by page, and: it has every page of
the English site at the same path, its pages are in Portuguese (``<html lang="pt-BR">``, the contents' captions, the
glossary from the pt-BR lesson 01, the explorer's note), its buttons open the pt-BR notebooks, and its search finds
"microlote". Every page of both has one language switch, to the same page in the other language.
"""

from __future__ import annotations

import contextlib
import functools
import html
import http.server
import re
import threading
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import nbformat
import pytest
from conftest import ROOT, record_measurement
from test_browser import ARTIFACTS, CHROMIUM_ARGS, _quiz_option, ensure_chromium

from gradacc.course.badges import read_repository
from gradacc.course.notebooks import BEGIN, END
from gradacc.course.site import LIVE_NOTE, build_site, npm_modules
from gradacc.i18n import translate

pytestmark = pytest.mark.xdist_group("site")  # one worker builds the site once for every test of this file

NOTEBOOKS = [
    p.relative_to(ROOT).as_posix() for f in ("lessons", "exercises") for p in sorted((ROOT / f).glob("*.ipynb"))
]
PT = "pt-BR/"  # the folder of the Brazilian Portuguese edition, in the repository and on the site
REPO = read_repository(ROOT / "pyproject.toml")

_PAGE = """async () => {
  if (window.MathJax && MathJax.startup) await MathJax.startup.promise;
  const main = document.querySelector("main") || document.body;
  return {
    title: document.title,
    text: main.innerText.length,
    images: [...document.querySelectorAll("main img")].map(i => ({
      src: i.getAttribute("src"), natural: i.naturalWidth, shown: i.width, complete: i.complete,
      output: !!i.closest(".cell_output"), alt: i.getAttribute("alt")})),
    links: [...document.querySelectorAll("a[href]")].map(a => a.href),
    math: document.querySelectorAll("main .math").length,
    typeset: document.querySelectorAll("main mjx-container").length,
    mathErrors: document.querySelectorAll("main mjx-merror").length,
    nav: [...document.querySelectorAll("nav.bd-docs-nav a.reference.internal")].map(a => a.getAttribute("href")),
    captions: [...document.querySelectorAll("nav.bd-docs-nav p.caption")].map(c => c.innerText.trim()),
    lang: document.documentElement.lang,
    switch: [...document.querySelectorAll(".gradacc-language a")].map(a => a.href),
    // the page's contents column: how far (px) its widest entry runs past the column's right edge
    contents: (() => {
      const column = document.querySelector(".bd-sidebar-secondary");
      if (!column || !column.offsetParent) return null;
      const right = column.getBoundingClientRect().right;
      return Math.max(0, ...[...column.querySelectorAll("*")].map(e => e.getBoundingClientRect().right - right));
    })(),
  };
}"""
WIDE = 1920  # besides 1400: the lessons' pages again in a window this wide (issue 45), in the dark colour mode
AXE = "axe-core/axe.min.js"  # in the site's npm packages (docs/package.json pins it; npm_modules installs it)
AXE_URL = "/__axe__/axe.min.js"
"""Where the test's server serves axe-core (``_Quiet``), outside the site: the browser compiles it once and reuses
the compiled code on every page (injected as text it took 0.17 s of CPU per page; from a URL, 0.05)."""
_AUDIT = """async () => {
  const result = await axe.run(document, {resultTypes: ["violations"]});
  return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                      nodes: v.nodes.map(n => n.target.join(" "))}));
}"""
"""axe-core's audit of the page as shown (its default rules: WCAG 2.0, 2.1 and 2.2 A and AA, and best practices)."""
SERIOUS = ("serious", "critical")
DARK_AUDIT = ("lessons/01_theory.html", "lessons/03_memory.html")
"""The pages audited again in the dark colour mode (in the 1920 px window): the theme's dark colours are the same on
every page; these two hold the most math, code, figures and tables."""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("site")
    built = build_site(ROOT, tmp / "site", work=tmp)
    files = [p for p in built.out.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files) / 2**20
    record_measurement(
        f"website: gradacc site built {len(built.pages)} pages in {built.seconds:.1f} s ({len(files)} files, "
        f"{size:.1f} MiB)"
    )
    return built


class _Quiet(http.server.SimpleHTTPRequestHandler):
    """The site's files, and axe-core at ``AXE_URL`` (cached by the browser)."""

    axe: Path | None = None

    def log_message(self, *args) -> None:
        pass

    def translate_path(self, path: str) -> str:
        return str(self.axe) if path == AXE_URL and self.axe else super().translate_path(path)

    def end_headers(self) -> None:
        if self.path == AXE_URL:
            self.send_header("Cache-Control", "max-age=3600")
        super().end_headers()


@pytest.fixture(scope="module")
def served(site) -> dict:
    """What the browser saw: ``base`` (the server's URL), ``pages`` ({page path: ``_PAGE``'s dict} in a 1400 px
    window), ``wide`` (the same for the lessons in a ``WIDE`` window), ``errors`` ({page: the console's errors and
    uncaught exceptions}), ``search`` (the result links for "micro-batch"; ``search_pt``: "microlote" on the pt-BR
    site), ``explorer`` (lesson 03's explorer cell and the note under it), ``blocked`` (requests not to the server)
    and ``failed`` (responses >= 400). Pages of both sites; each root's index.html only redirects to its
    docs/index.html (tested on the file)."""
    from playwright.sync_api import sync_playwright

    chromium = ensure_chromium()
    _Quiet.axe = npm_modules(ROOT) / AXE  # served outside the site, to the test's browser only
    handler = functools.partial(_Quiet, directory=str(site.out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    pages = sorted(
        p.relative_to(site.out).as_posix()
        for p in site.out.rglob("*.html")
        if "_static" not in p.parts and p.relative_to(site.out).as_posix() not in ("index.html", f"{PT}index.html")
    )
    seen, wide, errors, blocked, failed, audit = {}, {}, {}, [], [], {}
    import psutil

    audit_s = audit_cpu_s = 0.0
    start = time.perf_counter()

    def browser_cpu_s() -> float:  # the CPU seconds of this process's descendants: Playwright's driver and chromium
        total = 0.0
        for child in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                total += sum(child.cpu_times()[:2])
        return total

    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})

            def route(r) -> None:
                if r.request.url.startswith(base):
                    r.continue_()
                else:
                    blocked.append(r.request.url)
                    r.abort()

            reading = {"page": ""}  # the page the errors below belong to

            def watch(tab) -> None:
                tab.route("**/*", route)
                tab.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
                tab.on("console", lambda m: m.type == "error" and errors.setdefault(reading["page"], []).append(m.text))
                tab.on("pageerror", lambda e: errors.setdefault(reading["page"], []).append(f"uncaught: {e}"))

            def audited(tab, name: str) -> None:
                nonlocal audit_s, audit_cpu_s
                began, cpu = time.perf_counter(), browser_cpu_s()
                tab.add_script_tag(url=base + AXE_URL)
                audit[name] = tab.evaluate(_AUDIT)
                audit_s += time.perf_counter() - began
                audit_cpu_s += browser_cpu_s() - cpu

            watch(page)
            for path in pages:
                reading["page"] = path
                page.goto(f"{base}/{path}", wait_until="load")
                seen[path] = page.evaluate(_PAGE)
                audited(page, path)
            # the site follows the reader's system colour mode (html_context's default_mode: auto)
            wide_page = browser.new_page(viewport={"width": WIDE, "height": 1000}, color_scheme="dark")
            watch(wide_page)
            for path in (p for p in pages if p.startswith("lessons/")):
                reading["page"] = f"{path} ({WIDE} px)"
                wide_page.goto(f"{base}/{path}", wait_until="load")
                wide[path] = wide_page.evaluate(_PAGE)
                wide[path]["mode"] = wide_page.evaluate("document.documentElement.dataset.theme")
                if path in DARK_AUDIT:
                    audited(wide_page, f"{path} ({WIDE} px, dark)")
            reading["page"] = "search.html, pt-BR/search.html, lessons/03_memory.html again"
            page.goto(f"{base}/search.html?q=micro-batch", wait_until="load")
            page.wait_for_selector("ul.search li", timeout=30_000)
            search = page.eval_on_selector_all("ul.search li a", "links => links.map(a => a.href)")
            page.goto(f"{base}/{PT}search.html?q=microlote", wait_until="load")
            page.wait_for_selector("ul.search li", timeout=30_000)
            search_pt = page.eval_on_selector_all("ul.search li a", "links => links.map(a => a.href)")
            page.goto(f"{base}/lessons/03_memory.html", wait_until="load")
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=ARTIFACTS / "site-03_memory.png")
            # the explorer's cell at the top of the window: its code, its figure and the note under it
            note = page.locator(".admonition.note", has_text="needs a Python kernel")
            cell = note.locator("xpath=preceding-sibling::div[contains(@class, 'cell')][1]")
            cell.evaluate("e => e.scrollIntoView()")
            page.screenshot(path=ARTIFACTS / "site-03_memory-explorer.png")
            explorer = {
                "notes": note.count(),
                "note": note.inner_text(),
                "code": cell.locator(".cell_input").inner_text(),
                "figure": cell.locator(".cell_output img").evaluate("i => [i.naturalWidth, i.naturalHeight]"),
            }
            quiz = {}  # issue 53: lesson 03's questions answer on the page, in each edition, with no kernel
            for edition, lang in (("", "en"), (PT, "pt_BR")):
                reading["page"] = f"{edition}lessons/03_memory.html (its questions)"
                page.goto(f"{base}/{edition}lessons/03_memory.html", wait_until="load")
                box = page.locator(f"#gradaccQuiz03{lang}")
                box.locator("label.MCButton").first.wait_for(timeout=30_000)
                choice, says = _quiz_option("what-n-divides", "peak-divided-by-n", lang)
                box.locator("label.MCButton", has_text=choice).click()
                shown = box.locator(".Feedback.incorrect").first.inner_text()
                static = page.locator(f"#gradaccQuiz03{lang}-static").is_visible()  # the no-script copy, hidden
                quiz[lang] = {"questions": box.locator(".Quiz").count(), "shown": shown, "says": says, "static": static}
            browser.close()
    finally:
        server.shutdown()
    record_measurement(
        f"website: chromium read {len(pages)} pages and searched in {time.perf_counter() - start:.1f} s, of which "
        f"axe-core's audit of {len(audit)} pages {audit_s:.1f} s ({audit_cpu_s:.1f} s of the browser's CPU)"
    )
    return {"base": base, "pages": seen, "wide": wide, "errors": errors, "search": search, "search_pt": search_pt,
            "explorer": explorer, "quiz": quiz, "blocked": blocked, "failed": failed, "audit": audit}  # fmt: skip


@pytest.mark.slow
def test_the_build_publishes_every_notebook_and_warns_about_nothing(site):
    assert "WARNING" not in site.log and site.log.count("build succeeded") == 2, site.log[-3000:]  # both sites
    for edition in ("", PT):
        for path in NOTEBOOKS:
            assert (site.out / edition / path).with_suffix(".html").is_file(), edition + path
            # the download button gives the committed notebook, byte for byte
            assert (site.out / edition / "_sources" / path).read_bytes() == (ROOT / edition / path).read_bytes()
        assert (site.out / edition / "docs" / "instructors" / "grade.html").is_file()
        assert 'url=docs/index.html"' in (site.out / edition / "index.html").read_text()  # the root opens Start here


@pytest.mark.slow
def test_every_page_names_the_favicon_and_the_site_serves_favicon_ico(site):
    """Issue 55: the site's ``/favicon.ico`` was a 404 (its only console error in a browser that asks for it). The
    course's icon (docs/_static/favicon.ico, an ICO file) is published at the site's root, and every page of both
    editions names an icon that exists (``<link rel="icon">``, so that a browser asks for no other)."""
    icon = (ROOT / "docs" / "_static" / "favicon.ico").read_bytes()
    assert icon[:4] == b"\x00\x00\x01\x00", icon[:4]  # an ICO file's header: reserved 0, type 1 (icon)
    assert (site.out / "favicon.ico").read_bytes() == icon
    missing = {}
    for page in site.out.rglob("*.html"):
        if "_static" in page.parts or page.relative_to(site.out).as_posix() in ("index.html", f"{PT}index.html"):
            continue  # the theme's own files; each root's index.html only redirects (the browser then asks the root)
        links = re.findall(r'<link rel="icon" href="([^"]+)"', page.read_text(encoding="utf-8"))
        if len(links) != 1 or (page.parent / links[0]).read_bytes() != icon:
            missing[page.relative_to(site.out).as_posix()] = links
    assert missing == {}, dict(list(missing.items())[:5])


def _text(path: Path) -> str:
    """What a published file says: a notebook's cells and text outputs, an HTML page's text without tags, else the
    file."""
    if path.suffix == ".ipynb":
        cells = nbformat.read(path, as_version=4).cells
        outputs = [
            o.get("text", "") + o.get("data", {}).get("text/plain", "") for c in cells for o in c.get("outputs", [])
        ]
        return "\n".join([c.source for c in cells] + outputs)
    text = path.read_text(encoding="utf-8", errors="replace")
    return html.unescape(re.sub(r"<[^>]+>", "", text)) if path.suffix == ".html" else text


@pytest.mark.slow
def test_no_solution_is_published(site):
    """No file under solutions/ or hidden/, and no answer line of any solution (between the markers, 20 characters or
    more, in no exercise and no lesson: lesson 02 writes the loop out too) in any page's text, source or the search
    index."""
    assert not [p for p in site.out.rglob("*") if {"solutions", "hidden"} & set(p.relative_to(site.out).parts)]
    published = "\n".join(
        _text(p)
        for p in site.out.rglob("*")
        if p.is_file() and p.suffix in {".html", ".ipynb", ".md", ".js", ".txt"} and "_static" not in p.parts
    )
    known = "\n".join(
        _text(p)
        for edition in ("", PT)
        for folder in ("lessons", "exercises")
        for p in (ROOT / edition / folder).glob("*.ipynb")
    )
    answers = 0
    for path in sorted((ROOT / "solutions").glob("*.ipynb")) + sorted((ROOT / PT / "solutions").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            for block in re.findall(rf"{re.escape(BEGIN)}.*?\n(.*?){re.escape(END)}", cell.source, re.S):
                for line in (s.strip() for s in block.splitlines()):
                    if len(line) >= 20 and line not in known:
                        answers += 1
                        assert line not in published, f"{path.name}: an answer line is on the site: {line!r}"
    assert answers > 100, answers  # the check looked at the solutions' answers, in both editions


@pytest.mark.browser
def test_every_page_renders_with_its_figures_math_and_no_network(served):
    seen = served["pages"]
    assert served["blocked"] == [], f"pages asked for what is not on the site: {sorted(set(served['blocked']))[:10]}"
    assert served["failed"] == [], served["failed"][:10]
    short = ("genindex.html", "search.html", f"{PT}docs/maintainers.html")  # the last: a link to the English page
    for path, info in seen.items():
        assert info["title"].strip() and (info["text"] > 200 or path.endswith(short)), (path, info)
        for image in info["images"]:
            assert image["complete"] and image["natural"] > 0, (path, image["src"])
            if image["output"]:  # a notebook's figure at its real size
                assert image["shown"] == image["natural"], (path, image)
        assert info["typeset"] >= info["math"] and info["mathErrors"] == 0, (path, info["math"], info["typeset"])
    for edition in ("", PT):
        assert seen[f"{edition}lessons/01_theory.html"]["typeset"] > 10  # lesson 01 is mostly formulas
        pages = [info for path, info in seen.items() if path.startswith(PT) == bool(edition)]
        figures = sum(1 for info in pages for i in info["images"] if i["output"])
        assert figures >= 15, (edition, figures)


@pytest.mark.browser
def test_every_page_loads_without_a_console_error_and_shows_its_whole_contents_column(served):
    """Issue 45: no page logs an error or throws (MathJax's scripts loaded once, thebe's settings declared once), and
    no entry of a page's contents column runs past its right edge (long headings with code spans wrap), in a 1400 px
    window and, for the lessons, a 1920 px one."""
    assert served["errors"] == {}, {page: found[:3] for page, found in served["errors"].items()}
    assert len(served["wide"]) == len(list((ROOT / "lessons").glob("*.ipynb"))), sorted(served["wide"])
    cut = {f"{path} ({width} px)": info["contents"]
           for width, pages in ((1400, served["pages"]), (WIDE, served["wide"]))
           for path, info in pages.items() if info["contents"]}  # fmt: skip
    assert cut == {}, cut
    assert served["pages"]["lessons/10_stacks.html"]["contents"] == 0  # measured, not skipped: the column is shown


@pytest.mark.browser
def test_a_lessons_questions_answer_on_the_site_in_both_languages(served):
    """Issue 53: the stored quiz output works on the website with no kernel and no network (the pages' tests above
    assert no request left the site and no console error): a wrong choice shows its misconception's name and why,
    in English and in Portuguese."""
    for lang, quiz in served["quiz"].items():
        assert quiz["questions"] == 3 and quiz["says"] in quiz["shown"] and not quiz["static"], (lang, quiz)
    assert served["quiz"]["pt_BR"]["shown"].startswith("Não exatamente: ")


@pytest.mark.browser
def test_every_internal_link_resolves(served, site):
    base = served["base"]
    ids: dict[Path, set[str]] = {}
    broken = []
    for path, info in [*served["pages"].items(), ("search.html?q=micro-batch", {"links": served["search"]})]:
        for link in info["links"]:
            if not link.startswith(base):
                continue
            url = urlparse(link)
            target = site.out / unquote(url.path).lstrip("/")
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{path} -> {link}")
                continue
            if url.fragment and target.suffix == ".html":
                if target not in ids:
                    ids[target] = set(re.findall(r'\sid="([^"]+)"', target.read_text(encoding="utf-8")))
                if unquote(url.fragment) not in ids[target]:
                    broken.append(f"{path} -> {link} (no such anchor)")
    assert broken == [], broken[:20]


@pytest.mark.browser
def test_notebook_pages_launch_and_download_their_own_notebook(served):
    """The pt-BR site's buttons open the pt-BR notebook (pt-BR/lessons/01_theory.ipynb on Colab and Binder)."""
    for edition in ("", PT):
        for page in NOTEBOOKS:
            links = served["pages"][edition + str(Path(page).with_suffix(".html"))]["links"]
            path = edition + page
            assert (
                f"https://colab.research.google.com/github/{REPO.owner}/{REPO.name}/blob/{REPO.branch}/{path}" in links
            )
            assert f"https://mybinder.org/v2/gh/{REPO.owner}/{REPO.name}/{REPO.branch}?urlpath=lab/tree/{path}" in links
            assert f"{served['base']}/{edition}_sources/{page}" in links, path


@pytest.mark.browser
def test_contents_follow_the_lessons_folder_and_the_glossary_is_lesson_01s(served, site):
    for edition, some in (
        ("", {"micro-batch", "effective-batch-size"}),
        (PT, {"microlote", "tamanho-de-lote-efetivo"}),
    ):
        nav = [h.split("#")[0] for h in served["pages"][f"{edition}docs/index.html"]["nav"]]
        for folder in ("lessons", "exercises"):
            listed = [h for h in nav if h.startswith(f"../{folder}/")]
            assert listed == [f"../{p}".replace(".ipynb", ".html") for p in NOTEBOOKS if p.startswith(folder)], listed
        glossary = (site.out / edition / "docs" / "glossary.html").read_text(encoding="utf-8")
        terms = re.findall(r'<dt id="term-([^"]+)"', glossary)
        assert some <= set(terms) and len(terms) == 7, terms


@pytest.mark.browser
def test_the_pt_br_site_has_every_page_in_portuguese_and_each_page_switches_language(served, site):
    """Issue 46: the pt-BR site has the English site's pages at the same paths (the maintainer notes, not
    translated, as a page linking to the English one), in Portuguese (the theme's language, the contents' captions,
    the title); every page of both sites has one language switch, whose link opens the same page in the other
    language (a file of the site: the internal links test loads it too)."""
    pages = served["pages"]
    english = sorted(p for p in pages if not p.startswith(PT))
    assert sorted(p.removeprefix(PT) for p in pages if p.startswith(PT)) == english
    assert len(english) == len(site.pages) + 2  # and genindex.html, search.html
    for path, info in pages.items():
        counterpart = path.removeprefix(PT) if path.startswith(PT) else PT + path
        assert [urlparse(link).path for link in info["switch"]] == [f"/{counterpart}"], (path, info["switch"])
        assert (site.out / counterpart).is_file()
        assert info["lang"] == ("pt-BR" if path.startswith(PT) else "en"), (path, info["lang"])
        captions = info["captions"] if path.startswith(PT) else [translate(c, "pt_BR") for c in info["captions"]]
        assert captions == pages[PT + path.removeprefix(PT)]["captions"], (path, captions)
    assert pages["docs/index.html"]["captions"] == ["Lessons", "Exercises", "Instructors", "Reference"]
    assert pages[f"{PT}docs/index.html"]["captions"] == ["Lições", "Exercícios", "Instrutores", "Referência"]
    assert pages[f"{PT}lessons/01_theory.html"]["title"] == "01 · Teoria — Acúmulo de gradientes"
    # the maintainer notes stay English: the pt-BR pages link to the English page
    base = served["base"]
    assert f"{base}/docs/maintainers.html" in pages[f"{PT}docs/maintainers.html"]["links"]
    assert f"{base}/docs/maintainers.html#the-website" in pages[f"{PT}docs/index.html"]["links"]


@pytest.mark.browser
def test_search_finds_micro_batch_on_lesson_01(served):
    assert any(urlparse(link).path == "/lessons/01_theory.html" for link in served["search"]), served["search"]
    pt = [urlparse(link).path for link in served["search_pt"]]  # Sphinx's Portuguese search, on the pt-BR pages
    assert f"/{PT}lessons/01_theory.html" in pt and all(p.startswith(f"/{PT}") for p in pt), pt


@pytest.mark.browser
def test_the_memory_explorer_shows_its_figure_and_where_it_runs_live(served, site):
    outputs = [i for i in served["pages"]["lessons/03_memory.html"]["images"] if i["output"]]
    assert len(outputs) == 6 and all(i["natural"] > 500 for i in outputs), outputs  # 5 plots and the explorer
    explorer = served["explorer"]  # one note, right under the cell that builds the explorer, which shows its picture
    assert explorer["notes"] == 1 and "MemoryExplorer(" in explorer["code"], explorer
    width, height = explorer["figure"]  # the bars, then the verdict and timeline at two N (issue 45)
    assert width > 800 and height > width, explorer["figure"]
    assert all(where in explorer["note"] for where in ("JupyterLab", "Colab", "Binder")), explorer["note"]
    # the pt-BR page's note in Portuguese, with the command that opens JupyterLab on the pt-BR edition
    note = translate(LIVE_NOTE, "pt_BR").format(command="make lab-pt").replace("`", "")
    assert note != LIVE_NOTE and " ".join(note.split()) in " ".join(
        _text(site.out / PT / "lessons" / "03_memory.html").split()
    )
    shot = ARTIFACTS / "site-03_memory-explorer.png"
    assert shot.stat().st_size > 10_000 and (ARTIFACTS / "site-03_memory.png").stat().st_size > 10_000


@pytest.mark.browser
def test_every_page_passes_the_accessibility_audit(served):
    """Issue 55 (WCAG 2.1 AA): axe-core (``AXE``, pinned in docs/package.json) audits every page of both sites in a
    1400 px window, and lessons 01 and 03 again at 1920 px in the dark colour mode: no violation of serious or
    critical impact (contrast, headings, the language attribute, names of links and buttons, keyboard access...).
    Before the fixes: label-content-name-mismatch (the search and colour-mode buttons) and summary-name (the
    contents' toggles) on every page, scrollable-region-focusable (a wide figure in the dark mode). Prints every
    violation by rule."""
    audit = served["audit"]
    notebooks = len(list((ROOT / "lessons").glob("*.ipynb"))) + len(list((ROOT / "exercises").glob("*.ipynb")))
    assert len(audit) == len(served["pages"]) + len(DARK_AUDIT) == 2 * (21 + notebooks) + 2, len(audit)  # 21 pages
    assert {served["wide"][p]["mode"] for p in served["wide"]} == {"dark"}  # audited in the dark colour mode too
    by_rule: dict[tuple[str, str], list[str]] = {}
    for page, violations in audit.items():
        for v in violations:
            by_rule.setdefault((v["id"], v["impact"]), []).extend(f"{page}: {node}" for node in v["nodes"])
    for (rule, impact), nodes in sorted(by_rule.items()):
        print(f"axe-core {rule} ({impact}): {len(nodes)} elements, e.g. {nodes[0]}")
    serious = {f"{rule} ({impact})": nodes[:3] for (rule, impact), nodes in by_rule.items() if impact in SERIOUS}
    assert serious == {}, serious


@pytest.mark.browser
def test_every_figure_has_a_text_alternative_that_says_what_it_shows(served):
    """Issue 55: every figure of a notebook on the site has an ``alt`` that describes it (the cell's
    ``mystnb.image.alt``, gradacc.course.notebooks.FIGURE_ALT), never the file's name Jupyter Book gives it
    otherwise; in Portuguese on the pt-BR site."""
    alts: dict[str, list[str]] = {}
    for path, info in served["pages"].items():
        for image in info["images"]:
            if image["output"]:
                alts.setdefault(path, []).append(image["alt"] or "")
    bad = {p: a for p, found in alts.items() for a in found if len(a.split()) < 12 or a.endswith(".png")}
    assert bad == {}, bad
    figures = sum(len(found) for found in alts.values())
    assert figures == 2 * sum(len(alts[p]) for p in alts if not p.startswith(PT)) >= 36, figures
    for path, found in alts.items():
        if not path.startswith(PT):
            pt = alts[PT + path]
            assert len(pt) == len(found) and all(a != b for a, b in zip(found, pt, strict=True)), path
    assert any("microlotes" in a for a in alts[f"{PT}lessons/10_stacks.html"]), alts[f"{PT}lessons/10_stacks.html"]


def test_every_stored_figure_says_what_it_shows_and_is_opaque():
    """Issue 55: every figure a notebook stores (lessons and exercises, both editions; the explorer's picture too)
    has its text alternative in its cell's metadata (``FIGURE_ALT``: a sentence, translated in the pt-BR edition),
    and is opaque: no pixel lets JupyterLab's dark theme through, so no black text sits on a dark background."""
    import base64
    import io

    from PIL import Image

    from gradacc.course.notebooks import figure_alt

    missing, transparent, alts = [], [], {}
    for edition in ("", PT):
        for path in NOTEBOOKS:
            for cell in nbformat.read(ROOT / edition / path, as_version=4).cells:
                pngs = [o["data"]["image/png"] for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
                if not pngs:
                    continue
                where = f"{edition}{path} cell {cell.get('id')}"
                alt = figure_alt(cell) or ""
                alts[where] = alt
                if len(alt.split()) < 12:
                    missing.append(where)
                for png in pngs:
                    image = Image.open(io.BytesIO(base64.b64decode(png)))
                    if (
                        image.mode in ("RGBA", "LA", "P")
                        and image.convert("RGBA").getchannel("A").getextrema()[0] < 255
                    ):
                        transparent.append(where)
    assert missing == [] and transparent == [], (missing, transparent)
    assert len(alts) >= 36 and all(alts[w] != alts[PT + w] for w in alts if not w.startswith(PT)), len(alts)


def test_github_pages_publishes_make_site_from_main():
    """.github/workflows/site.yml builds with `make site` and publishes its output folder, on pushes to main."""
    import yaml

    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "site.yml").read_text())
    assert workflow[True]["push"]["branches"] == ["main"]  # YAML 1.1 reads the key `on` as True
    steps = workflow["jobs"]["build"]["steps"]
    assert any(s.get("run", "").startswith("make site") for s in steps)
    assert {"uses": "actions/upload-pages-artifact@v3", "with": {"path": "build/site"}} in steps
    assert workflow["jobs"]["deploy"]["steps"][0]["uses"] == "actions/deploy-pages@v4"
    assert "site:" in (ROOT / "Makefile").read_text()
