// The documents list and a document's page: files are sent one by one as soon as they are
// chosen or dropped, each with its progress, then followed through the pipeline; rows,
// the quota and a document's parts are replaced in place while anything is in progress
// (polled, with a backoff, and not while the tab is hidden). No update touches a form
// field, so nothing typed or chosen is lost; focus stays where it was.
(() => {
  "use strict";

  const FIRST_DELAY = 1000;
  const MAX_DELAY = 10000;
  const PARALLEL = 2;

  // --- Replacing HTML in place, keeping focus -----------------------------------------
  function fromHTML(html) {
    const template = document.createElement("template");
    template.innerHTML = html.trim();
    return template.content;
  }

  function keepingFocus(region, replace) {
    const active = document.activeElement;
    const inside = active && active !== document.body && region.contains(active);
    const id = inside ? active.id : "";
    const fresh = replace();
    if (!inside) return;
    const again = (id && document.getElementById(id)) || fresh.querySelector("a, button");
    if (again) again.focus();
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
  const documentPage = document.querySelector("[data-live-document]");
  const followed = new Set();
  const items = new Map(); // document id -> upload list item
  let delay = FIRST_DELAY;
  let timer = null;
  let stopped = false;

  if (rows) {
    for (const row of rows.querySelectorAll("tr[data-active]")) followed.add(row.dataset.document);
  }

  function schedule(ms) {
    clearTimeout(timer);
    timer = null;
    if (stopped || document.hidden) return;
    const waiting = documentPage ? documentPage.dataset.active === "true" : followed.size > 0;
    if (waiting) timer = setTimeout(poll, ms);
  }

  function soon() {
    delay = FIRST_DELAY;
    schedule(FIRST_DELAY / 2);
  }

  async function fetchJSON(url) {
    const response = await fetch(url, {
      headers: { Accept: "application/json" },
      credentials: "same-origin",
      cache: "no-store",
    });
    if (response.redirected || !response.ok) {
      // Signed out meanwhile (sent to the sign-in page): stop asking.
      if (response.redirected) stopped = true;
      throw new Error(`answered ${response.status}`);
    }
    return response.json();
  }

  async function poll() {
    let changed = false;
    try {
      changed = documentPage ? await pollDocument() : await pollList();
    } catch (error) {
      changed = false;
    }
    delay = changed ? FIRST_DELAY : Math.min(delay * 1.5, MAX_DELAY);
    schedule(delay);
  }

  async function pollList() {
    const ids = [...followed].slice(0, 100);
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
      if (!entry.active) followed.delete(entry.id);
    }
    // Gone (deleted meanwhile): no longer followed.
    const seen = new Set(answer.documents.map((entry) => entry.id));
    for (const id of ids) if (!seen.has(id)) followed.delete(id);
    const count = document.getElementById("document-count");
    if (count && count.textContent !== answer.count) count.textContent = answer.count;
    const quota = document.getElementById("quota");
    if (quota && quota.dataset.html !== answer.quota) {
      quota.dataset.html = answer.quota;
      replaceInside(quota, answer.quota);
    }
    return changed;
  }

  async function pollDocument() {
    const answer = await fetchJSON(documentPage.dataset.liveDocument + window.location.search);
    documentPage.dataset.active = answer.active ? "true" : "";
    if (answer.digest === documentPage.dataset.digest) return false;
    documentPage.dataset.digest = answer.digest;
    for (const [name, html] of Object.entries(answer.parts)) {
      const part = documentPage.querySelector(`[data-part="${name}"]`);
      if (part && part.dataset.html !== html) {
        part.dataset.html = html;
        replaceInside(part, html);
      }
    }
    return true;
  }

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

  function newItem(file) {
    const item = document.createElement("li");
    item.className = "upload-item";
    const name = document.createElement("span");
    name.className = "name";
    name.textContent = file.name;
    const bar = document.createElement("progress");
    bar.max = 100;
    bar.value = 0;
    bar.setAttribute("aria-label", `Sending ${file.name}`);
    const state = document.createElement("span");
    state.className = "state";
    state.textContent = "Waiting to be sent";
    item.append(name, " ", bar, " ", state);
    list.prepend(item);
    return item;
  }

  function progress(item, share) {
    const bar = item.querySelector("progress");
    if (!bar) return;
    bar.value = Math.round(share * 100);
    item.querySelector(".state").textContent = `Sending ${bar.value}%`;
  }

  function refused(item, detail) {
    item.classList.add("refused");
    const bar = item.querySelector("progress");
    if (bar) bar.remove();
    const state = item.querySelector(".state");
    state.textContent = `Not accepted: ${detail}`;
    state.setAttribute("role", "alert");
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
      const empty = document.getElementById("no-documents");
      if (empty) empty.hidden = true;
    }
    followed.add(answer.document_id);
    soon();
  }

  function answered(item, result, fallback) {
    if (result.status === 202 && result.data) accepted(item, result.data);
    else if (result.data && result.data.detail) refused(item, result.data.detail);
    else if (result.status === 0) refused(item, "the connection failed; choose the file again to retry.");
    else if (result.status === 413) refused(item, "the file is too large.");
    else refused(item, fallback || `the server answered ${result.status}; try again in a minute.`);
  }

  async function sendThroughWeb(file, item) {
    const body = new FormData();
    body.append("file", file, file.name);
    const result = await send("POST", form.dataset.upload, body, {
      headers: { "X-CSRFToken": csrfToken(), Accept: "application/json" },
      onProgress: (share) => progress(item, share),
    });
    answered(item, result);
  }

  async function sendToS3(file, item) {
    const asked = await send("POST", form.dataset.direct, JSON.stringify({
      filename: file.name, size_bytes: file.size, content_type: file.type || null,
    }), { headers: { "X-CSRFToken": csrfToken(), "Content-Type": "application/json" } });
    if (asked.status !== 201 || !asked.data) return answered(item, asked);
    const headers = { ...asked.data.headers };
    delete headers["Content-Length"]; // the browser sets it, and may not be told
    const put = await send("PUT", asked.data.url, file, {
      headers, json: false, onProgress: (share) => progress(item, share),
    });
    if (put.status < 200 || put.status >= 300) {
      return refused(item, "the storage did not take the file; try again in a minute.");
    }
    item.querySelector(".state").textContent = "Checking the file";
    const done = await send("POST", asked.data.complete_url, null, {
      headers: { "X-CSRFToken": csrfToken() },
    });
    answered(item, done);
  }

  function pump() {
    while (sending < PARALLEL && queue.length) {
      const { file, item } = queue.shift();
      sending += 1;
      const directAbove = Number(form.dataset.directAbove || 0);
      const job = directAbove && file.size > directAbove ? sendToS3(file, item) : sendThroughWeb(file, item);
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

  schedule(FIRST_DELAY);
})();
