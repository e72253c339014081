"""The member pages in Chromium, against one gunicorn and one run_workers shared by every
test here: files dropped at once go through the pipeline live with no page load, a
document's page reads its text and downloads its file, a failed run is retried, a token
is made and revoked, a viewer is offered nothing to change, the list pages past 100
documents; every member page fits 390 px and axe-core finds nothing serious on it. With
S3 (a server of its own), a large file goes from the page straight to the bucket.

Screenshots of the upload, document, search and tokens pages, at 1280 and 390 px, are
written under var/screenshots/ (two of them are shown by the README, from docs/images/).
"""

import base64
import re
import time
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.db.models import F
from django.utils import timezone

from connectors.models import Connection, ConnectionEvent, ConnectionSync, ConnectorImport
from documents.models import Chunk, Document, Organisation, QuotaReservation, UsageEntry
from documents.services.organisations import member_add, organisation_create
from pipeline.models import ImportRun
from tests.support import hostile, real_world
from tests.support.admin import make_connections
from tests.support.files import make_docx, make_pdf
from tests.support.members import PASSWORD, document_with_text, documents_made
from tests.support.pipeline import TEST_PIPELINE_ENV, running_workers, wait_terminal
from tests.support.processes import ROOT, process_env, web_server
from tests.support.runs import document_with_chunks
from web.document_views import DIRECT_UPLOAD_BYTES

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SCREENSHOTS = ROOT / "var" / "screenshots"
WIDTHS = (1280, 390)
# A real 19-page PDF whose words are on some pages only (tests/fixtures/real_world).
GEOBASE = "GeoBase_NHNC1_Data_Model_UML_EN.pdf"

# What the policy and the browser need to be told: our pages, nothing else.
SERIOUS = ("serious", "critical")


@pytest.fixture(scope="module")
def site(django_db_setup, django_db_blocker, tmp_path_factory):
    """One web server and one set of workers for the module, on the test database."""
    media = tmp_path_factory.mktemp("media")
    with django_db_blocker.unblock():
        env = process_env(MEDIA_ROOT=str(media), **TEST_PIPELINE_ENV)
        with web_server(workers=2, threads=4, env=env) as base:
            # Idle at the end: no stage to finish, nothing to wait for.
            with running_workers(MEDIA_ROOT=str(media), PAPERLANE_SHUTDOWN_GRACE_SECONDS="2"):
                yield SimpleNamespace(base=base, media=media)


@pytest.fixture
def acme(db):
    organisation = organisation_create(slug="acme", page_limit=200, name="Acme")
    member_add(organisation=organisation, username="ada", password=PASSWORD, role="admin")
    return organisation


# Watches the pages' script: how many of its live requests are on their way at once (each
# answer held back 400 ms, so that a second poll started meanwhile would overlap it), what
# its live region says, and whether progress is ever written as a percentage.
WATCH_LIVE = """
(() => {
  window.__live = { inFlight: 0, most: 0, asked: 0 };
  window.__said = [];
  window.__percent = false;
  const original = window.fetch.bind(window);
  window.fetch = async (url, options) => {
    if (!String(url).includes("/live/")) return original(url, options);
    const watch = window.__live;
    watch.asked += 1;
    watch.inFlight += 1;
    watch.most = Math.max(watch.most, watch.inFlight);
    try {
      const response = await original(url, options);
      await new Promise((resolve) => setTimeout(resolve, 400));
      return response;
    } finally {
      watch.inFlight -= 1;
    }
  };
  document.addEventListener("DOMContentLoaded", () => {
    const watched = { childList: true, subtree: true, characterData: true };
    const said = document.getElementById("live-said");
    const record = () => window.__said.push(said.textContent);
    if (said) new MutationObserver(record).observe(said, watched);
    const uploads = document.getElementById("upload-list");
    if (uploads) {
      new MutationObserver(() => {
        if (/\\d%/.test(uploads.textContent)) window.__percent = true;
      }).observe(uploads, watched);
    }
  });
})();
"""


def _wait_until(page, predicate: str, timeout: float = 20.0) -> None:
    """Until `predicate` (a function's source, run in the page) returns true. Polled from
    here: Playwright's own wait_for_function evaluates the source again in the page by
    `eval`, which the pages' Content-Security-Policy refuses."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(predicate):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {predicate}")
        page.wait_for_timeout(100)


def _signed_in(browser, site, username: str, width: int = 1280, watch: bool = False):
    context = browser.new_context(viewport={"width": width, "height": 900}, accept_downloads=True)
    if watch:
        context.add_init_script(WATCH_LIVE)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.goto(f"{site.base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(f"{site.base}/")
    return context, page


def _drop(page, files: dict[str, bytes], target: str = "[data-drop]") -> None:
    """Drop the files on `target` at once, as a person dragging them from their desktop."""
    payload = [
        {"name": name, "b64": base64.b64encode(data).decode()} for name, data in files.items()
    ]
    transfer = page.evaluate_handle(
        """(files) => {
            const transfer = new DataTransfer();
            for (const file of files) {
                const bytes = Uint8Array.from(atob(file.b64), (c) => c.charCodeAt(0));
                transfer.items.add(new File([bytes], file.name));
            }
            return transfer;
        }""",
        payload,
    )
    page.dispatch_event(target, "dragover", {"dataTransfer": transfer})
    page.dispatch_event(target, "drop", {"dataTransfer": transfer})


def _item(page, name: str):
    return page.locator("#upload-list li", has=page.locator(".name", has_text=name))


def _shoot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    width = page.viewport_size["width"]
    page.screenshot(path=str(SCREENSHOTS / f"{name}-{width}.png"), full_page=True)


# What a page at its width breaks badly: a plain word (letters, maybe a bracket or a stop
# around them) broken across lines ("St/at/us"), or a name or a path that would fit in
# 10 rem ("doc-002.p/df"; a longer one may break where it must), and a date or a table's
# header on more than one line.
LAYOUT_FAULTS = r"""
() => {
  const hidden = ".visually-hidden, script, style, pre, option, select, textarea, [hidden]";
  // Clipped to a pixel for the eye, kept for screen readers (a narrow table's headers).
  const clipped = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const box = e.getBoundingClientRect();
      if (box.width <= 1 || box.height <= 1) return true;
    }
    return false;
  };
  const shown = (node) => {
    const parent = node.parentElement;
    return parent && !parent.closest(hidden) && parent.getClientRects().length && !clipped(parent);
  };
  const textNodes = (root) => {
    const nodes = [], walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) if (shown(walker.currentNode)) nodes.push(walker.currentNode);
    return nodes;
  };
  // The lines the text (of a node, or a part of it) is laid out on, by their bottoms.
  const range = document.createRange();
  const bottoms = (node, start, end) => {
    range.setStart(node, start ?? 0);
    range.setEnd(node, end ?? node.length);
    return [...range.getClientRects()]
      .filter((r) => r.width > 0 && r.height > 0)
      .map((r) => Math.round(r.bottom));
  };
  const lines = (el) => new Set(textNodes(el).flatMap((node) => bottoms(node))).size;
  const where = (el) => el.tagName.toLowerCase() + (el.className ? "." + el.className : "");
  const faults = [];
  const short = 10 * parseFloat(getComputedStyle(document.documentElement).fontSize);
  for (const node of textNodes(document.body)) {
    for (const match of node.textContent.matchAll(/\S+/g)) {
      const end = match.index + match[0].length;
      range.setStart(node, match.index);
      range.setEnd(node, end);
      const parts = [...range.getClientRects()].filter((r) => r.width > 0 && r.height > 0);
      if (new Set(parts.map((r) => Math.round(r.bottom))).size < 2) continue;
      const word = /^[(“"]?\p{L}+[)”".,:;!?]*$/u.test(match[0]);
      const width = parts.reduce((sum, r) => sum + r.width, 0);
      if (word || width < short) {
        faults.push(`word broken: ${match[0]} (${where(node.parentElement)})`);
      }
    }
  }
  for (const el of document.querySelectorAll("time")) {
    if (lines(el) > 1) faults.push(`date on two lines: ${el.textContent}`);
  }
  for (const el of document.querySelectorAll("table thead th")) {
    if (getComputedStyle(el.closest("table")).display === "table" && lines(el) > 1) {
      faults.push(`header on two lines: ${el.textContent.trim()}`);
    }
  }
  return faults;
}
"""


def test_three_files_dropped_at_once_go_through_live_with_no_page_load(browser, site, acme):
    context, page = _signed_in(browser, site, "ada", watch=True)
    loads = []
    page.on(
        "framenavigated",
        lambda frame: loads.append(frame.url) if frame == page.main_frame else None,
    )
    report = make_pdf(3, label="Lighthouse report")
    documents_made(acme, 1, prefix="from-a-colleague")  # after the page was drawn

    _drop(page, {"report.pdf": report, "minutes.docx": make_docx(2), "notes.txt": b"plain text"})
    # The tab shown again, while polls are on their way: each asks for one at once.
    _item(page, "report.pdf").locator(".status").wait_for()
    for _ in range(3):
        page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
        page.wait_for_timeout(150)

    refused = _item(page, "notes.txt").locator(".state")
    refused.wait_for()
    _wait_until(
        page, "() => document.querySelector('#upload-list').innerText.match(/Not accepted/)"
    )
    assert "Only PDF, Word (.docx), PNG, JPEG and TIFF files are supported" in refused.inner_text()
    for name in ("report.pdf", "minutes.docx"):
        _item(page, name).locator(".status-succeeded").wait_for()
        page.locator(f"#document-rows tr:has-text('{name}') .status-succeeded").wait_for()
    assert loads == [], loads
    # One poll at a time, however many asked for one.
    assert page.evaluate("window.__live.most") == 1
    # The colleague's document is not drawn in, but counted and offered.
    assert page.locator("#document-count").inner_text() == "3 documents"
    assert page.locator("#new-documents").inner_text() == "1 new document: show it"
    # A screen reader hears the refusal and the two results, never a percentage sent.
    said = " ".join(page.evaluate("window.__said"))
    assert "notes.txt was not accepted: “notes.txt”: Only PDF, Word" in said, said
    assert "report.pdf: Succeeded." in said and "minutes.docx: Succeeded." in said, said
    assert page.evaluate("window.__percent") is False
    assert page.locator("#upload-list[aria-live], #document-rows [aria-live]").count() == 0
    charged = sum(UsageEntry.objects.values_list("pages", flat=True))
    assert page.locator("[data-quota-used]").inner_text() == str(charged)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        _shoot(page, "upload")

    # The document's page: its text from page 1, and its file with the session.
    page.set_viewport_size({"width": 1280, "height": 900})
    page.click("#document-rows a.name:text-is('report.pdf')")
    page.locator("#page-1").wait_for()
    assert "Lighthouse report 1" in page.locator("#page-1").inner_text()
    assert "Extract" in page.locator("ol.timeline").first.inner_text()
    with page.expect_download() as download:
        page.click("text=Download the original")
    assert download.value.suggested_filename == "report.pdf"
    assert Path(download.value.path()).read_bytes() == report
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        _shoot(page, "document")

    # Search, with the documents just processed: the words marked, the pages named.
    page.goto(f"{site.base}/search/?q=lighthouse")
    found = page.locator("ol.results li").first
    found.wait_for()
    assert found.locator("mark").first.inner_text().lower() == "lighthouse"
    assert re.search(r"p\. \d", found.locator(".where").inner_text())
    axe = Axe()
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        _shoot(page, "search")
        wide = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert wide[0] <= wide[1], (width, wide)
        serious = [v["id"] for v in axe.run(page).response["violations"] if v["impact"] in SERIOUS]
        assert serious == [], (width, serious)
    # The result opens its document at the page holding the words, scrolled to them.
    page.set_viewport_size({"width": 1280, "height": 900})
    found.locator("a.result-name").click()
    page.wait_for_url(re.compile(r"/documents/[^/]+/\?page=(\d+)&q=[^#]+#page-\1-found$"))
    shown = page.locator("article", has=page.locator("#" + page.url.rsplit("#", 1)[1]))
    assert "Lighthouse report" in shown.inner_text()
    assert page.evaluate("document.querySelector(location.hash).getBoundingClientRect().top") < 900
    context.close()


def test_leaving_while_a_file_is_sent_asks_first_and_a_refused_poll_stops_and_says_why(
    browser, site, acme
):
    context, page = _signed_in(browser, site, "ada")
    dialogs, held, polls = [], [], []

    def dismiss(dialog):
        dialogs.append(dialog.type)
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.route("**/upload/", lambda route: held.append(route))  # answered when told

    _drop(page, {"slow.pdf": make_pdf(1)})
    while not held:
        page.wait_for_timeout(50)
    page.click("form.filters button[type=submit]")  # would abort the upload

    assert dialogs == ["beforeunload"] and page.url == f"{site.base}/"
    # Signed out meanwhile: the poll that follows the file is refused.
    signed_out = {"detail": "You were signed out; sign in again.", "code": "unauthorized"}
    page.route(
        "**/documents/live/**",
        lambda route: polls.append(route.request.url) or route.fulfill(status=401, json=signed_out),
    )
    held[0].continue_()
    _item(page, "slow.pdf").locator(".state .status").wait_for()
    page.locator("#live-stopped").wait_for()
    assert "You were signed out; sign in again." in page.inner_text("#live-stopped")
    page.wait_for_timeout(2_000)  # past the next poll's time, had it gone on
    assert len(polls) == 1
    # Nothing is being sent: leaving asks nothing.
    page.click("form.filters button[type=submit]")
    page.wait_for_url(f"{site.base}/?*")
    assert dialogs == ["beforeunload"]
    context.close()


def _poll_now(page) -> None:
    """Have the page ask at once (as when its tab is shown again) and wait for the answer."""
    asked = page.evaluate("window.__live.asked")
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    _wait_until(page, f"() => window.__live.asked > {asked} && window.__live.inFlight === 0")
    page.wait_for_timeout(50)  # the answer applied


def test_a_documents_page_replaces_only_what_changed_keeping_focus_scroll_and_selection(
    browser, site, acme
):
    document = document_with_text(acme, [f"Page {n}\n" + "a line\n" * 200 for n in range(1, 4)])
    run = ImportRun.objects.create(
        organisation=acme,
        document=document,
        reservation=QuotaReservation.objects.create(organisation=acme, pages=3),
        source="web",
        status="processing",
        stage="embed",
        progress_total=10,
        progress_done=1,
        # Held by a worker elsewhere, for longer than the test: the workers leave it alone.
        lease_owner="elsewhere",
        lease_expires_at=timezone.now() + timedelta(hours=1),
    )
    runs = ImportRun.objects.filter(id=run.id)
    context, page = _signed_in(browser, site, "ada", watch=True)
    page.goto(f"{site.base}/documents/{document.id}/")
    text = "document.getElementById('page-1-text')"
    page.evaluate(f"{text}.kept = true; {text}.focus(); {text}.scrollTop = 300")

    # Its run moves on: the processing part alone is replaced.
    runs.update(progress_done=5, updated_at=timezone.now())
    _poll_now(page)
    page.locator("[data-part=status] progress[value='5']").wait_for()
    assert page.evaluate(f"[{text}.kept, document.activeElement.id, {text}.scrollTop]") == [
        True,
        "page-1-text",
        300,
    ]
    # Its text changes: replaced, with the focus and the scroll where they were.
    Document.objects.filter(id=document.id).update(text_chars=F("text_chars") + 1)
    _poll_now(page)
    assert page.evaluate(f"[{text}.kept, document.activeElement.id, {text}.scrollTop]") == [
        None,
        "page-1-text",
        300,
    ]
    # Text selected in it: kept as it is until the selection ends.
    page.evaluate(f"{text}.kept = true; window.getSelection().selectAllChildren({text})")
    Document.objects.filter(id=document.id).update(text_chars=F("text_chars") + 1)
    _poll_now(page)
    assert page.evaluate(f"[{text}.kept, window.getSelection().toString().length > 0]") == [
        True,
        True,
    ]
    page.evaluate("window.getSelection().removeAllRanges()")
    _wait_until(page, f"() => !{text}.kept")
    # It ends: said once, in the page's one live region.
    runs.update(status="succeeded", stage="settle", updated_at=timezone.now())
    _poll_now(page)
    page.locator("[data-part=status] .status-succeeded").wait_for()
    assert "pages.pdf: Succeeded." in page.evaluate("window.__said")
    assert page.locator("[aria-live]").count() == 0
    assert page.locator("[role=status]").count() == 1
    context.close()


def test_a_run_failed_over_quota_is_retried_once_there_is_room(browser, site, acme):
    Organisation.objects.filter(id=acme.id).update(page_limit=10)
    context, page = _signed_in(browser, site, "ada")

    _drop(page, {"long.pdf": hostile.pdf_with_lying_count(real_pages=12, stated=1)})
    _item(page, "long.pdf").locator(".status-failed").wait_for()
    assert "12 pages" in _item(page, "long.pdf").inner_text()
    page.click("#document-rows a.name:text-is('long.pdf')")
    assert "Free pages" in page.locator(".problem").inner_text()

    organisation_create(slug="acme", page_limit=100)  # the operator raises the limit
    page.click("button:has-text('Retry')")
    page.locator("[data-part=status] .status-succeeded").wait_for()
    assert "Page 1 of 12" in page.locator("[data-part=text]").inner_text()
    run = ImportRun.objects.get(document__filename="long.pdf")
    assert (run.status, run.generation) == ("succeeded", 1)
    context.close()


def test_an_admin_makes_a_token_copies_it_and_revokes_it(browser, site, acme):
    context, page = _signed_in(browser, site, "ada")
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site.base)

    page.click("nav >> text=API tokens")
    page.fill("#id_name", "nightly export")
    page.select_option("#id_role", "viewer")
    page.click("button:has-text('Create token')")
    secret = page.input_value("#token-secret")
    assert secret.startswith("pl_")
    page.click("button[data-copy]")
    page.locator("[data-copied]:has-text('Copied')").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == secret
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        _shoot(page, "tokens")

    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{site.base}/tokens/")
    assert secret not in page.content()
    page.click("a:has-text('Revoke')")
    page.click("button:has-text('Revoke')")
    page.locator(".message.success").wait_for()
    assert "Revoked" in page.locator("table.tokens").inner_text()
    context.close()


def test_an_admin_adds_a_member_with_the_form_and_they_sign_in(browser, site, acme):
    context, page = _signed_in(browser, site, "ada", width=390)

    page.click("nav >> text=Members")
    page.fill("#id_username", "bea")
    page.fill("#id_password", "short")
    page.select_option("#id_role", "viewer")
    page.click("button:has-text('Add member')")
    # Refused by the password validators, on the form, which keeps the rest.
    page.locator(".field .error-text").wait_for()
    assert "too short" in page.inner_text(".field .error-text")
    assert page.input_value("#id_username") == "bea" and page.input_value("#id_password") == ""
    assert page.input_value("#id_role") == "viewer"
    page.fill("#id_password", PASSWORD)
    page.click("button:has-text('Add member')")
    page.locator(".message.success").wait_for()
    said = page.inner_text(".message.success")
    members = page.locator("table.members").inner_text()
    context.close()

    assert "bea can now sign in as a viewer of Acme" in said
    assert "bea" in members and "Viewer" in members
    context, page = _signed_in(browser, site, "bea")
    assert "You are a viewer of Acme" in page.inner_text("main")
    context.close()


def test_a_viewer_is_offered_no_upload_or_delete(browser, site, acme):
    member_add(organisation=acme, username="vic", password=PASSWORD, role="viewer")
    documents_made(acme, 2)
    context, page = _signed_in(browser, site, "vic")

    assert page.locator("input[type=file]").count() == 0
    assert page.locator("a:has-text('Delete'), button:has-text('Cancel')").count() == 0
    assert "You are a viewer of Acme" in page.inner_text("main")
    page.click("#document-rows a.name >> nth=0")
    assert page.locator("a:has-text('Delete'), button:has-text('Retry')").count() == 0
    assert page.locator("nav >> text=API tokens").count() == 0
    context.close()


def test_the_list_pages_past_a_hundred_documents(browser, site, acme):
    documents_made(acme, 120)
    context, page = _signed_in(browser, site, "ada")

    assert "120 documents" in page.inner_text("#document-count")
    seen = []
    while True:
        seen += page.locator("#document-rows a.name").all_inner_texts()
        older = page.locator("a[rel=next]")
        if not older.count():
            break
        older.click()
        page.wait_for_load_state()
    assert seen == [f"doc-{n:03d}.pdf" for n in range(119, -1, -1)]
    assert "Page 5 of 5" in page.inner_text("nav.pages")
    context.close()


def test_the_keyboard_reaches_the_content_first_and_shows_where_it_is(browser, site, acme):
    context, page = _signed_in(browser, site, "ada")

    page.keyboard.press("Tab")
    skip = page.evaluate(
        "(() => { const e = document.activeElement, box = e.getBoundingClientRect();"
        " return [e.textContent, box.left >= 0 && box.top >= 0,"
        " getComputedStyle(e).outlineStyle]; })()"
    )
    page.keyboard.press("Enter")  # to the main content
    page.keyboard.press("Tab")  # its first control: the file input
    focused = page.evaluate("document.activeElement.id")

    assert skip == ["Skip to the content", True, "solid"]
    assert focused == "upload-files"
    context.close()


def test_every_member_page_fits_390_px_and_axe_finds_nothing_serious(browser, site, acme):
    documents_made(acme, 3)
    document = Document.objects.filter(organisation=acme).first()
    # Search results with pages, a section, marked words, and pages of results.
    found = document_with_chunks(
        acme,
        "harbour-survey-with-a-long-name-that-must-wrap-on-a-phone.pdf",
        ["opening", "The harbour survey of the northern breakwater " * 6],
    )
    Chunk.objects.filter(document=found, index=1).update(
        page_start=3, page_end=4, section="Breakwaters and moles of the northern harbour"
    )
    for n in range(21):
        document_with_chunks(acme, f"harbour-{n:02d}.pdf", [f"harbour note {n}"])
    [connection] = make_connections(acme, 1)
    _connection_with_a_past(connection)
    globex = organisation_create(slug="globex", page_limit=10, name="Globex")
    member_add(organisation=globex, username="ada")
    # A PDF of twelve pages, each shown as a picture beside its text (the list previews
    # every document's first page: each has its file).
    pictured = document_with_text(
        acme, [f"Soundings of the harbour, page {n}. " * 20 for n in range(1, 13)]
    )
    _files_stored(site, acme)
    pages = [
        "/",
        f"/documents/{pictured.id}/",
        f"/documents/{pictured.id}/?page=11",
        f"/documents/{document.id}/",
        f"/documents/{document.id}/delete/",
        "/search/",
        "/search/?q=anything",
        "/search/?q=harbour",
        "/search/?q=harbour&offset=20",
        f"/search/?q=harbour&document={found.id}",
        f"/documents/{found.id}/",
        "/connections/",
        f"/connections/{connection.id}/",
        f"/connections/{connection.id}/disconnect/",
        # OneDrive is not set up on the test server: the page that says so (a 503).
        "/connections/onedrive/connect/",
        "/tokens/",
        "/members/",
        "/accounts/password/",
        "/accounts/password/done/",
    ]
    axe = Axe()
    found = {}
    for width in WIDTHS:
        context, page = _signed_in(browser, site, "ada", width=width)
        # What the Content-Security-Policy refused, and the scripts' errors, on every page.
        page.add_init_script(
            "document.addEventListener('securitypolicyviolation', (e) => {"
            " (window.__violations = window.__violations || [])"
            ".push(e.violatedDirective + ' ' + e.blockedURI); });"
        )
        errors = []
        page.on("pageerror", lambda error, errors=errors: errors.append(str(error)))
        token = None
        for path in pages + ["token"]:
            if path == "token":  # a token's revoke page, once one is made
                page.goto(f"{site.base}/tokens/")
                page.fill("#id_name", f"walk {width}")
                page.click("button:has-text('Create token')")
                token = re.search(r"/tokens/(\d+)/revoke/", page.content())[1]
                path = f"/tokens/{token}/revoke/"
            page.goto(f"{site.base}{path}")
            page.wait_for_load_state("load")
            wide = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            if width == 390 and wide[0] > wide[1]:
                found[(width, path)] = f"{wide[0]} px wide"
            violations = [
                f"{v['id']}: {v['help']} ({len(v['nodes'])})"
                for v in axe.run(page).response["violations"]
                if v["impact"] in SERIOUS
            ]
            if violations:
                found[(width, path)] = violations
            if faults := page.evaluate(LAYOUT_FAULTS):
                found[(width, path, "layout")] = faults
            if faults := _pictures_missing(
                page, every=path.startswith(f"/documents/{pictured.id}/")
            ):
                found[(width, path, "pictures")] = faults
            if path == f"/documents/{pictured.id}/?page=11":
                _shoot(page, "document-pictures")
            refused = page.evaluate("window.__violations || []")
            if refused or errors:
                found[(width, path, "policy")] = refused + errors
        context.close()
    # Signed out: the sign-in page.
    context = browser.new_context(viewport={"width": 390, "height": 900})
    page = context.new_page()
    page.goto(f"{site.base}/accounts/login/")
    wide = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert wide[0] <= wide[1]
    assert not [v for v in axe.run(page).response["violations"] if v["impact"] in SERIOUS]
    context.close()
    assert found == {}, "\n".join(f"{where}: {what}" for where, what in found.items())


def _files_stored(site, organisation: Organisation) -> None:
    """A PDF of each document's page count at its key in the site's storage, as its
    upload would have put it there: what its pictures are drawn from."""
    for document in Document.objects.filter(organisation=organisation):
        path = Path(site.media) / document.storage_key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(make_pdf(document.page_count or 1))


def _pictures_missing(page, *, every: bool) -> list[str]:
    """The page's pictures in view that did not arrive (or, with `every`, "none" when it
    shows no picture of a page), once those in view have loaded; and a picture whose box
    is not the size its width and height attributes promised (the layout would jump)."""
    in_view = (
        "[...document.querySelectorAll('img.picture')]"
        ".filter((i) => i.getBoundingClientRect().top < innerHeight)"
    )
    _wait_until(page, f"{in_view}.every((i) => i.complete)")
    faults = page.evaluate(
        f"""() => {in_view}.flatMap((i) => {{
          const box = i.getBoundingClientRect();
          const ratio = i.width / i.height;
          const promised = i.getAttribute("width") / i.getAttribute("height");
          return [
            ...(i.naturalWidth ? [] : [`not loaded: ${{i.getAttribute("src")}}`]),
            ...(Math.abs(ratio - promised) < 0.02 ? [] : [`box ${{box.width}}x${{box.height}}`]),
          ];
        }})"""
    )
    if every and not page.locator("img.picture-page").count():
        faults.append("none")
    return faults


def _connection_with_a_past(connection: Connection) -> None:
    """What a connection's page shows after a while: syncs (one that met a problem), its
    history, and files that failed, one with a long reason."""
    now = timezone.now()
    Connection.objects.filter(id=connection.id).update(
        last_sync_at=now,
        last_sync_result="ok",
        files_seen=14,
        files_imported=11,
        files_failed=2,
        files_skipped=1,
        next_sync_at=now + timedelta(minutes=5),
    )
    ConnectionSync.objects.bulk_create(
        [
            ConnectionSync(
                connection=connection,
                started_at=now - timedelta(minutes=m),
                finished_at=now - timedelta(minutes=m) + timedelta(seconds=3),
                result=result,
                files_seen=14,
                imports_started=started,
                files_skipped=1,
                problem=problem,
                error="technical detail" if problem else "",
            )
            for m, result, started, problem in [(1, "ok", 3, ""), (30, "failed", 0, "unknown")]
        ]
    )
    ConnectionEvent.objects.create(
        connection=connection,
        actor="system",
        action="paused",
        status_before="active",
        status_after="paused",
        reason="Paused after 5 failed syncs in a row. Something went wrong; try again later.",
    )
    ConnectorImport.objects.filter(connection=connection).update(
        state="failed",
        reason="scan.pdf has 400 pages but only 12 pages of your quota are left. Raise the "
        "page limit and retry it.",
    )


def test_at_1280_px_the_documents_table_keeps_headers_and_dates_on_one_line(browser, site, acme):
    [finished, running, failed] = documents_made(acme, 3)
    reason = (
        "The file could not be read: its cross-reference table points past the end of the "
        "file at object 4711, and repairing it would mean guessing which of 212 objects "
        "belong to which page. Export it again from the program that made it, then upload "
        "the new file; if it fails again, tell the people who run Paperlane."
    )
    for document, fields in [
        (
            running,
            # Held by a worker elsewhere, for longer than the test: the workers leave it alone.
            dict(
                status="processing",
                stage="embed",
                progress_total=240,
                progress_done=17,
                lease_owner="elsewhere",
                lease_expires_at=timezone.now() + timedelta(hours=1),
            ),
        ),
        (failed, dict(status="failed", stage="extract", error_code="x", error_message=reason)),
    ]:
        ImportRun.objects.create(
            organisation=acme,
            document=document,
            reservation=QuotaReservation.objects.create(organisation=acme, pages=1),
            source="web",
            **fields,
        )
    context, page = _signed_in(browser, site, "ada", width=1280)

    page.locator("#document-rows progress").wait_for()
    faults = page.evaluate(LAYOUT_FAULTS)
    shown = page.locator(f"#doc-{failed.id} .error-text")
    title, box = shown.get_attribute("title"), shown.bounding_box()
    line = float(page.evaluate("parseFloat(getComputedStyle(document.body).lineHeight)"))
    _shoot(page, "documents-busy")
    context.close()

    assert faults == [], faults
    # The long reason: a few lines at most, the whole of it in its title.
    assert title == reason
    assert box["height"] <= 3.5 * line, box


def test_with_s3_a_large_file_goes_straight_to_the_bucket_with_its_progress(
    browser, acme, s3, tmp_path
):
    # The page's origin PUTs to the bucket: its CORS allows it, as a deployment's must.
    s3.client.put_bucket_cors(
        Bucket=s3.bucket,
        CORSConfiguration={
            "CORSRules": [
                {
                    "AllowedOrigins": ["*"],
                    "AllowedMethods": ["PUT"],
                    "AllowedHeaders": ["*"],
                }
            ]
        },
    )
    # Past the size above which the page sends a file straight to the bucket (9 MB).
    large, small = make_pdf(80, words_per_page=16_000, label="Large"), make_pdf(1)
    assert len(large) > DIRECT_UPLOAD_BYTES > len(small)
    env = process_env(MEDIA_ROOT=str(tmp_path / "media"), **s3.env)
    with web_server(workers=1, threads=4, env=env) as base:
        site = SimpleNamespace(base=base)
        context, page = _signed_in(browser, site, "ada")
        puts = []
        page.on("request", lambda r: puts.append(r.url) if r.method == "PUT" else None)

        _drop(page, {"large.pdf": large, "small.pdf": small})

        for name in ("large.pdf", "small.pdf"):
            # Accepted: its run's stage follows (the module's workers, on another storage,
            # may take it from there).
            page.locator("#upload-list li.accepted", has_text=name).wait_for()
        context.close()
    [put] = puts
    assert put.startswith(s3.env["AWS_S3_ENDPOINT_URL"])
    runs = {run.document.filename: run for run in ImportRun.objects.select_related("document")}
    assert {name: run.source for name, run in runs.items()} == {
        "large.pdf": "web",
        "small.pdf": "web",
    }
    assert runs["large.pdf"].document.storage_key in put


def test_a_file_already_uploaded_links_to_its_document_and_a_second_copy_can_be_sent(
    browser, site, acme
):
    context, page = _signed_in(browser, site, "ada")
    minutes = make_pdf(2, label="Board minutes")
    _drop(page, {"minutes.pdf": minutes})
    _item(page, "minutes.pdf").locator(".status").wait_for()
    first = Document.objects.get(organisation=acme)

    _drop(page, {"minutes again.pdf": minutes})

    again = _item(page, "minutes again.pdf")
    again.locator("button:text-is('Upload a second copy')").wait_for()
    assert again.locator(".state").inner_text().startswith("Already uploaded as minutes.pdf")
    assert again.locator(".state a").get_attribute("href") == f"/documents/{first.id}/"
    assert Document.objects.filter(organisation=acme).count() == 1

    again.locator("button:text-is('Upload a second copy')").click()

    # Both processed before the test ends: the workers write nothing after it.
    for name in ("minutes.pdf", "minutes again.pdf"):
        _item(page, name).locator(".status-succeeded").wait_for()
    copies = Document.objects.filter(organisation=acme).order_by("created_at")
    assert [d.filename for d in copies] == ["minutes.pdf", "minutes again.pdf"]
    assert sorted(UsageEntry.objects.values_list("pages", flat=True)) == [2, 2]
    context.close()


def test_without_javascript_the_form_sends_one_or_many_files(browser, site, acme):
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{site.base}/accounts/login/")
    page.fill("#id_username", "ada")
    page.fill("#id_password", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(f"{site.base}/")
    good, bad = make_pdf(6), b"<!DOCTYPE html><html><body>not a PDF</body></html>"

    page.set_input_files(
        "input[type=file]",
        files=[
            {"name": "quarterly report.pdf", "mimeType": "application/pdf", "buffer": good},
            {"name": "not really.pdf", "mimeType": "application/pdf", "buffer": bad},
        ],
    )
    page.click("form.upload button[type=submit]")

    page.locator(".message.success").wait_for()
    assert "“quarterly report.pdf” was accepted" in page.inner_text(".message.success")
    assert "“not really.pdf”: Only PDF, Word" in page.inner_text(".message.error")
    assert "quarterly report.pdf" in page.inner_text("#document-rows")
    context.close()
    # The module's workers finish the upload before the test's data is emptied: a charge
    # written meanwhile would hold on to a document the emptying removes.
    runs = ImportRun.objects.filter(organisation=acme).values_list("id", flat=True)
    wait_terminal(list(runs), timeout=60)


def test_the_operators_front_pages_fit_390_px(browser, site, acme):
    # The admin's index (with our list of operations) and the pipeline dashboard, whose
    # tables are wider than a phone: they scroll inside their section, not the page.
    member_add(organisation=acme, username="otto", password=PASSWORD, staff=True)
    documents_made(acme, 2)
    context, page = _signed_in(browser, site, "otto", width=390)
    found = {}
    for path in ["/admin/", "/admin/pipeline/"]:
        page.goto(f"{site.base}{path}")
        page.wait_for_load_state("load")
        wide = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        if wide[0] > wide[1]:
            found[path] = f"{wide[0]} px wide"
        faults = [f for f in page.evaluate(LAYOUT_FAULTS) if f.startswith("word broken")]
        if faults:
            found[(path, "layout")] = faults
    context.close()

    assert found == {}, "\n".join(f"{where}: {what}" for where, what in found.items())


@pytest.mark.parametrize("width", [1280, 390])
def test_a_search_result_lands_on_the_page_holding_the_words_marked_and_in_view(
    browser, site, acme, width
):
    # A real 19-page PDF: "codelist" is on page 10 and pages 12 to 18, not on page 1.
    context, page = _signed_in(browser, site, "ada", width=width)
    _drop(page, {"geobase.pdf": (real_world.FOLDER / GEOBASE).read_bytes()})
    page.locator("#document-rows tr:has-text('geobase.pdf') .status-succeeded").wait_for(
        timeout=60_000
    )

    page.goto(f"{site.base}/search/?q=codelists")  # its other form finds and marks it
    link = page.locator("ol.results a.result-name").first
    landing = int(re.search(r"page=(\d+)", link.get_attribute("href"))[1])
    link.click()
    page.wait_for_load_state()

    assert landing >= 10
    assert page.url.endswith(f"#page-{landing}-found")
    first = page.locator(f"#page-{landing} mark").first
    assert first.inner_text().lower() == "codelist"
    # In view, and focused, for a keyboard or a screen reader to start from.
    box, height = first.bounding_box(), page.viewport_size["height"]
    assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= height, box
    assert page.evaluate("document.activeElement.tagName") == "MARK"
    # The next mark is a link away, and it takes the focus too. Marks are numbered across
    # the pages shown, which may begin before the landing page.
    number = int(first.get_attribute("id").removeprefix("mark-"))
    page.locator(f"#page-{landing} .mark-steps a[aria-label='Next marked word']").first.click()
    assert page.evaluate("document.activeElement.id") == f"mark-{number + 1}"
    assert not page.evaluate("document.documentElement.scrollWidth > window.innerWidth + 1")
    context.close()
