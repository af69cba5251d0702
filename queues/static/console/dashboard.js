// Refreshes the dashboard in place from its JSON view; a static file, so the CSP needs no
// inline script. Durations and shares come worded by the server (the row's `words`), so the
// page reads the same before and after a refresh.
(function () {
  "use strict";
  const table = document.getElementById("queues");
  if (!table) return;
  const lag = document.getElementById("ingest-lag");
  const EVERY_MS = 5000;
  function pendingDetail(row) {
    const parts = [];
    if (row.delayed) parts.push(row.delayed + " delayed");
    if (row.retrying) parts.push(row.retrying + " retrying");
    return parts.join(" · ");
  }
  function utcClock(t) {
    return new Date(t * 1000).toISOString().slice(0, 16).replace("T", " ") + " UTC";
  }
  // The chart comes drawn (and escaped) by the server; parsed as SVG, never as HTML.
  function drawChart(cell, markup) {
    if (cell.lastMarkup === markup) return;
    const svg = new DOMParser().parseFromString(markup, "image/svg+xml").documentElement;
    if (svg.namespaceURI !== "http://www.w3.org/2000/svg") return;
    cell.replaceChildren(document.importNode(svg, true));
    cell.lastMarkup = markup;
  }

  function showRow(tr, row) {
    for (const el of tr.querySelectorAll("[data-field]")) {
      const field = el.dataset.field;
      if (field === "paused") el.hidden = !row.paused;
      else if (field === "never_posted") el.hidden = !row.never_posted;
      else if (field === "pending_detail") el.textContent = pendingDetail(row);
      else if (field === "chart") drawChart(el, row.chart);
      else if (field in row.words) el.textContent = row.words[field];
      else el.textContent = String(row[field]);
      if (field === "failed_day") el.classList.toggle("status-failed", row.failed_day > 0);
    }
  }
  function showLag(found) {
    if (!lag) return;
    lag.hidden = !found;
    const since = lag.querySelector("[data-lag-since]");
    if (found && since) {
      since.dateTime = new Date(found.oldest_t * 1000).toISOString();
      since.textContent = utcClock(found.oldest_t);
    }
  }
  function show(data) {
    for (const row of data.queues) {
      const key = CSS.escape(row.host + "/" + row.queue);
      const tr = table.querySelector(`tr[data-queue="${key}"]`);
      if (tr) showRow(tr, row);
    }
    showLag(data.ingest_lag);
  }
  async function refresh() {
    if (!document.hidden) {
      try {
        const response = await fetch(table.dataset.source, { credentials: "same-origin" });
        if (response.ok) show(await response.json());
      } catch (error) {
        // A missed refresh is harmless: the next one tries again.
      }
    }
    setTimeout(refresh, EVERY_MS);
  }
  for (const cell of table.querySelectorAll('[data-field="chart"]')) {
    cell.lastMarkup = null;
  }
  setTimeout(refresh, EVERY_MS);
})();
