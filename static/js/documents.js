// The documents list and a document's page: files are sent one by one as soon as they are
// chosen or dropped, each with its progress, then followed through the pipeline; rows,
// the quota and a document's parts are replaced in place while anything is in progress
// (polled one request at a time, with a backoff, and not while the tab is hidden). No
// update touches a form field, so nothing typed or chosen is lost; focus, the scroll of a
// text box and a selection stay where they were. A screen reader hears one small live
// region: a file refused, a document done, polling stopped; never each step of progress.
(() => {
  "use strict";

  const FIRST_DELAY = 1000;
  const MAX_DELAY = 10000;
  // After a poll that was asked for while another was on its way (a file accepted, the
  // tab shown again): soon, but never at once with it.
  const AGAIN_DELAY = 250;
  const PARALLEL = 2;

  // --- What the page says -------------------------------------------------------------
  const said = document.getElementById("live-said");
  let saying = [];

  // What one answer brings (two documents done at once) is said together: words replaced
  // before a screen reader read them would not be heard.
  function say(words) {
    if (!said) return;
    if (!saying.length) {
      setTimeout(() => {
        // A new node, so that words repeated are said again.
        const line = document.createElement("span");
        line.textContent = saying.join(" ");
        saying = [];
        said.replaceChildren(line);
      }, 0);
    }
    saying.push(/[.!?]$/.test(words) ? words : `${words}.`);
  }

  // --- Replacing HTML in place, keeping focus, scroll and selection -------------------
  function fromHTML(html) {
    const template = document.createElement("template");
    template.innerHTML = html.trim();
    return template.content;
  }

  function keepingFocus(region, replace) {
    const active = document.activeElement;
    const inside = active && active !== document.body && region.contains(active);
    const id = inside ? active.id : "";
    // Text boxes scroll on their own (pre.text): each is found again by its id.
    const scrolled = [...region.querySelectorAll("pre.text[id]")].map((box) => [
      box.id, box.scrollTop, box.scrollLeft,
    ]);
    const fresh = replace();
    for (const [boxId, top, left] of scrolled) {
      const box = document.getElementById(boxId);
      if (box) {
        box.scrollTop = top;
        box.scrollLeft = left;
      }
    }
    if (!inside) return;
    const again = (id && document.getElementById(id)) || fresh.querySelector("a, button, [tabindex]");
    if (again) again.focus({ preventScroll: true });
  }

  // Whether the person has selected text in the region: replacing it would drop that.
  function selecting(region) {
    const selection = window.getSelection();
    if (!selection || selection.isCollapsed || !selection.rangeCount) return false;
    return selection.getRangeAt(0).intersectsNode(region);
  }

  function replaceRow(row, html) {
    const fresh = fromHTML(html).firstElementChild;
    keepingFocus(row, () => { row.replaceWith(fresh); return fresh; });
  }

  function replaceInside(element, html) {
    keepingFocus(element, () => { element.innerHTML = html; return element; });
  }

  // --- Asking the server --------------------------------------------------------------
  function csrfToken() {
    const field = document.querySelector("input[name=csrfmiddlewaretoken]");
    return field ? field.value : "";
  }

  // An XMLHttpRequest as a promise, for its upload progress; resolves with status and body.
  function send(method, url, body, { headers = {}, onProgress, json = true } = {}) {
    return new Promise((resolve) => {
      const xhr = new XMLHttpRequest();
      xhr.open(method, url);
      for (const [name, value] of Object.entries(headers)) xhr.setRequestHeader(name, value);
      if (onProgress) {
        xhr.upload.addEventListener("progress", (event) => {
          if (event.lengthComputable) onProgress(event.loaded / event.total);
        });
      }
      xhr.addEventListener("load", () => {
        let data = null;
        if (json) {
          try { data = JSON.parse(xhr.responseText); } catch (error) { data = null; }
        }
        resolve({ status: xhr.status, data });
      });
      xhr.addEventListener("error", () => resolve({ status: 0, data: null }));
      xhr.addEventListener("abort", () => resolve({ status: 0, data: null }));
      xhr.send(body);
    });
  }

  // --- Following documents through the pipeline --------------------------------------
  const table = document.getElementById("documents");
  const rows = document.getElementById("document-rows");
  const form = document.querySelector("form[data-upload]");
  const listLive = table ? table.dataset.liveUrl : "";
  const liveMax = table ? Number(table.dataset.liveMax) : 0;
  // The documents the page accounts for: those it was drawn with and those it added.
  let known = table ? Number(table.dataset.total) : 0;
  const documentPage = document.querySelector("[data-live-document]");
  const followed = new Set();
  const items = new Map(); // document id -> upload list item
  let delay = FIRST_DELAY;
  let timer = null;
  let polling = false; // a poll is on its way: never two at once
  let again = false; // asked for meanwhile: poll again when it is back
  let deferred = false; // a part kept as it was while text in it is selected
  let stopped = false;

  if (rows) {
    for (const row of rows.querySelectorAll("tr[data-active]")) followed.add(row.dataset.document);
  }

  function waiting() {
    if (documentPage) return documentPage.dataset.active === "true" || deferred;
    return followed.size > 0;
  }

  function schedule(ms) {
    clearTimeout(timer);
    timer = null;
    if (stopped || document.hidden || !waiting()) return;
    if (polling) {
      again = true;
      return;
    }
    timer = setTimeout(poll, ms);
  }

  function soon() {
    delay = FIRST_DELAY;
    schedule(FIRST_DELAY / 2);
  }

  function stop(words) {
    stopped = true;
    clearTimeout(timer);
    timer = null;
    const note = document.getElementById("live-stopped");
    if (note) {
      note.textContent = `${words} This page is no longer kept up to date.`;
      note.hidden = false;
    }
    say(words);
  }

  const REFUSED_WORDS = {
    401: "You were signed out; sign in again.",
    403: "You may no longer see these documents; reload the page.",
    404: "This is not there any more.",
  };

  // A refusal (4xx) stops the polling and says why: asking again would be refused again.
  async function fetchJSON(url) {
    const response = await fetch(url, {
      headers: { Accept: "application/json" },
      credentials: "same-origin",
      cache: "no-store",
    });
    if (response.redirected || (response.status >= 400 && response.status < 500)) {
      let detail = "";
      try { detail = (await response.json()).detail || ""; } catch (error) { detail = ""; }
      const words = response.redirected ? REFUSED_WORDS[401] : REFUSED_WORDS[response.status];
      stop(detail || words || `The server refused to say more (${response.status}).`);
      throw new Error(`answered ${response.status}`);
    }
    if (!response.ok) throw new Error(`answered ${response.status}`); // tried again later
    return response.json();
  }

  async function poll() {
    timer = null;
    polling = true;
    let changed = false;
    try {
      changed = documentPage ? await pollDocument() : await pollList();
    } catch (error) {
      changed = false;
    }
    polling = false;
    if (again) {
      again = false;
      delay = FIRST_DELAY;
      schedule(AGAIN_DELAY);
      return;
    }
    delay = changed ? FIRST_DELAY : Math.min(delay * 1.5, MAX_DELAY);
    schedule(delay);
  }

  async function pollList() {
    const ids = [...followed].slice(0, liveMax);
    if (!ids.length) return false;
    const query = ids.map((id) => `id=${encodeURIComponent(id)}`).join("&");
    const answer = await fetchJSON(`${listLive}?${query}`);
    let changed = false;
    for (const entry of answer.documents) {
      const row = document.getElementById(`doc-${entry.id}`);
      if (row && row.dataset.digest !== entry.digest) {
        replaceRow(row, entry.row);
        changed = true;
      }
      const item = items.get(entry.id);
      if (item && item.dataset.digest !== entry.digest) {
        item.dataset.digest = entry.digest;
        replaceInside(item.querySelector(".state"), entry.item);
        changed = true;
      }
      if (!entry.active) {
        if (item && followed.has(entry.id)) say(`${entry.filename}: ${entry.summary}`);
        followed.delete(entry.id);
      }
    }
    // Gone (deleted meanwhile): no longer followed.
    const seen = new Set(answer.documents.map((entry) => entry.id));
    for (const id of ids) if (!seen.has(id)) followed.delete(id);
    const count = document.getElementById("document-count");
    if (count && count.textContent !== answer.count) count.textContent = answer.count;
    showNew(answer.total - known);
    const quota = document.getElementById("quota");
    if (quota && quota.dataset.digest !== answer.quota_digest) {
      quota.dataset.digest = answer.quota_digest;
      replaceInside(quota, answer.quota);
    }
    return changed;
  }

  // Documents others added meanwhile (a colleague, an integration, a connected folder)
  // are not drawn into the list: a link says how many, and shows them.
  function showNew(fresh) {
    const note = document.getElementById("new-documents");
    if (!note) return;
    note.hidden = fresh <= 0;
    if (fresh > 0) {
      note.firstElementChild.textContent =
        `${fresh} new document${fresh === 1 ? "" : "s"}: show ${fresh === 1 ? "it" : "them"}`;
    }
  }

  async function pollDocument() {
    const query = new URLSearchParams(window.location.search);
    query.delete("have");
    for (const part of documentPage.querySelectorAll("[data-part]")) {
      query.append("have", `${part.dataset.part}:${part.dataset.digest || ""}`);
    }
    const answer = await fetchJSON(`${documentPage.dataset.liveDocument}?${query}`);
    const was = documentPage.dataset.active === "true";
    documentPage.dataset.active = answer.active ? "true" : "";
    deferred = false;
    let changed = false;
    for (const [name, fresh] of Object.entries(answer.parts || {})) {
      const part = documentPage.querySelector(`[data-part="${name}"]`);
      if (!part) continue;
      if (selecting(part)) {
        // Kept, with its old digest, so that the next answer brings it again.
        deferred = true;
        continue;
      }
      replaceInside(part, fresh.html);
      part.dataset.digest = fresh.digest;
      changed = true;
    }
    if (was && !answer.active && answer.summary) say(answer.summary);
    return changed;
  }

  document.addEventListener("selectionchange", () => {
    if (deferred && window.getSelection().isCollapsed) schedule(0);
  });

  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      clearTimeout(timer);
      timer = null;
    } else {
      delay = FIRST_DELAY;
      schedule(0);
    }
  });

  // --- Sending files ------------------------------------------------------------------
  const list = document.getElementById("upload-list");
  const queue = [];
  let sending = 0;

  // Leaving the page would abort what is being sent (and leave a direct upload open).
  window.addEventListener("beforeunload", (event) => {
    if (sending || queue.length) {
      event.preventDefault();
      event.returnValue = "";
    }
  });

  function newBar(file) {
    const bar = document.createElement("progress");
    bar.max = 100;
    bar.value = 0;
    bar.setAttribute("aria-label", `Sending ${file.name}`);
    return bar;
  }

  function newItem(file) {
    const item = document.createElement("li");
    item.className = "upload-item";
    const name = document.createElement("span");
    name.className = "name";
    name.textContent = file.name;
    const state = document.createElement("span");
    state.className = "state";
    state.textContent = "Waiting to be sent";
    item.append(name, " ", newBar(file), " ", state);
    list.prepend(item);
    return item;
  }

  // Progress is the bar's alone: its steps are not written as words.
  function progress(item, share) {
    const bar = item.querySelector("progress");
    if (!bar) return;
    bar.value = Math.round(share * 100);
    const state = item.querySelector(".state");
    if (state.textContent !== "Sending") state.textContent = "Sending";
  }

  function refused(item, detail) {
    item.classList.add("refused");
    const bar = item.querySelector("progress");
    if (bar) bar.remove();
    item.querySelector(".state").textContent = `Not accepted: ${detail}`;
    say(`${item.querySelector(".name").textContent} was not accepted: ${detail}`);
  }

  // The organisation has these bytes already (a 200 naming `duplicate_of`): a link to
  // their document, and a button that sends the file again as a second copy.
  function alreadyUploaded(item, answer, file) {
    const bar = item.querySelector("progress");
    if (bar) bar.remove();
    const state = item.querySelector(".state");
    const link = document.createElement("a");
    link.href = answer.url;
    link.textContent = answer.filename;
    const again = document.createElement("button");
    again.type = "button";
    again.className = "link";
    again.textContent = "Upload a second copy";
    again.addEventListener("click", () => {
      state.textContent = "Waiting to be sent";
      item.insertBefore(newBar(file), state);
      queue.push({ file, item, secondCopy: true });
      pump();
    });
    state.replaceChildren(
      "Already uploaded as ", link, "; not sent again, no pages charged. ", again,
    );
    say(`${file.name} was already uploaded as ${answer.filename}; it was not sent again`);
  }

  function accepted(item, answer) {
    item.classList.add("accepted");
    const bar = item.querySelector("progress");
    if (bar) bar.remove();
    item.dataset.document = answer.document_id;
    item.dataset.digest = answer.digest;
    replaceInside(item.querySelector(".state"), answer.item);
    items.set(answer.document_id, item);
    if (rows && rows.dataset.firstPage === "true" && !document.getElementById(`doc-${answer.document_id}`)) {
      rows.prepend(fromHTML(answer.row));
      known += 1;
      const empty = document.getElementById("no-documents");
      if (empty) empty.hidden = true;
    }
    followed.add(answer.document_id);
    soon();
  }

  const STATUS_WORDS = {
    0: "the connection failed; choose the file again to retry.",
    401: "you were signed out; sign in again, then choose the file again.",
    403: "the page is out of date (you may have signed in again elsewhere); reload it.",
    413: "the file is too large.",
  };

  function answered(item, result, file) {
    if (result.status === 202 && result.data) accepted(item, result.data);
    else if (result.status === 200 && result.data && result.data.duplicate_of) {
      alreadyUploaded(item, result.data, file);
    }
    else if (result.data && result.data.detail) refused(item, result.data.detail);
    else if (STATUS_WORDS[result.status]) refused(item, STATUS_WORDS[result.status]);
    else refused(item, `the server answered ${result.status}; try again in a minute.`);
  }

  async function sendThroughWeb(file, item, secondCopy) {
    const body = new FormData();
    body.append("file", file, file.name);
    if (secondCopy) body.append("allow_duplicate", "true");
    const result = await send("POST", form.dataset.upload, body, {
      headers: { "X-CSRFToken": csrfToken(), Accept: "application/json" },
      onProgress: (share) => progress(item, share),
    });
    answered(item, result, file);
  }

  async function sendToS3(file, item, secondCopy) {
    const asked = await send("POST", form.dataset.direct, JSON.stringify({
      filename: file.name, size_bytes: file.size, content_type: file.type || null,
    }), { headers: { "X-CSRFToken": csrfToken(), "Content-Type": "application/json" } });
    if (asked.status !== 201 || !asked.data) return answered(item, asked, file);
    const headers = { ...asked.data.headers };
    delete headers["Content-Length"]; // the browser sets it, and may not be told
    const put = await send("PUT", asked.data.url, file, {
      headers, json: false, onProgress: (share) => progress(item, share),
    });
    if (put.status < 200 || put.status >= 300) {
      return refused(item, "the storage did not take the file; try again in a minute.");
    }
    item.querySelector(".state").textContent = "Checking the file";
    const complete = new FormData();
    if (secondCopy) complete.append("allow_duplicate", "true");
    const done = await send("POST", asked.data.complete_url, complete, {
      headers: { "X-CSRFToken": csrfToken() },
    });
    answered(item, done, file);
  }

  function pump() {
    while (sending < PARALLEL && queue.length) {
      const { file, item, secondCopy } = queue.shift();
      sending += 1;
      const directAbove = Number(form.dataset.directAbove || 0);
      const job = directAbove && file.size > directAbove
        ? sendToS3(file, item, secondCopy) : sendThroughWeb(file, item, secondCopy);
      job.finally(() => { sending -= 1; pump(); });
    }
  }

  function size(bytes) {
    if (bytes >= 1024 * 1024) return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
    return `${Math.ceil(bytes / 1024)} KB`;
  }

  function add(files) {
    const most = Number(form.dataset.maxBytes || 0);
    for (const file of files) {
      const item = newItem(file);
      // Said at once, without sending what the server would refuse unread.
      if (most && file.size > most) {
        refused(item, `“${file.name}” is too large (${size(file.size)}). One file may be at most ${size(most)}.`);
      } else {
        queue.push({ file, item });
      }
    }
    pump();
  }

  if (form && list) {
    const input = form.querySelector("input[type=file]");
    input.addEventListener("change", () => {
      add([...input.files]);
      input.value = "";
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      add([...input.files]);
      input.value = "";
    });
    const zone = form.querySelector("[data-drop]");
    // A file dropped anywhere on the page is sent, never opened in place of the page.
    window.addEventListener("dragover", (event) => {
      event.preventDefault();
      zone.classList.add("over");
    });
    window.addEventListener("dragleave", (event) => {
      if (!event.relatedTarget) zone.classList.remove("over");
    });
    window.addEventListener("drop", (event) => {
      event.preventDefault();
      zone.classList.remove("over");
      if (event.dataTransfer && event.dataTransfer.files.length) add([...event.dataTransfer.files]);
    });
  }

  // --- Landing on the words a search found ---------------------------------------------
  // A search result opens the page holding its words at `#page-N-found`, just before the
  // first of them (the server marks them); a mark's own links step to `#mark-K`. Focus
  // follows, so that keyboard and screen reader users start there too.
  function focusFound() {
    const id = decodeURIComponent(location.hash.slice(1));
    if (!/^(page-\d+-found|mark-\d+)$/.test(id)) return;
    const target = document.getElementById(id);
    if (!target) return;
    const next = target.nextElementSibling;
    const mark = target.tagName === "MARK" ? target : next && next.tagName === "MARK" ? next : null;
    const focusable = mark || target.closest("pre");
    if (focusable) focusable.focus();
  }
  window.addEventListener("hashchange", focusFound);
  // Once loaded: the browser's own move to the fragment, made after this script runs,
  // would take the focus back to the page.
  if (document.readyState === "complete") focusFound();
  else window.addEventListener("load", () => setTimeout(focusFound, 0));

  schedule(FIRST_DELAY);
})();
