// Refreshes the dashboard in place from its JSON view; a static file, so the CSP needs no
// inline script. The formats mirror queues/durations.py and queues/templatetags/readable.py.
(function () {
  "use strict";
  const table = document.getElementById("queues");
  if (!table) return;
  const lag = document.getElementById("ingest-lag");
  const EVERY_MS = 5000;
  const NONE = "—";
  const words = window.taskhoster.secondsInWords;  // words.js, loaded first
  function age(ms) {
    if (ms === null || ms === undefined) return NONE;
    if (ms < 1000) return ms + " ms";
    if (ms < 10000) return (ms / 1000).toFixed(1) + " s";
    return words(Math.round(ms / 1000));
  }
  function percent(share) {
    if (share === null || share === undefined) return NONE;
    return share === 0 || share >= 0.01 ? Math.round(share * 100) + "%" : "<1%";
  }
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
  const FORMATS = { oldest_pending_ms: age, failure_rate: percent };

  function showRow(tr, row) {
    for (const el of tr.querySelectorAll("[data-field]")) {
      const field = el.dataset.field;
      if (field === "paused") el.hidden = !row.paused;
      else if (field === "never_posted") el.hidden = !row.never_posted;
      else if (field === "pending_detail") el.textContent = pendingDetail(row);
      else if (field === "chart") drawChart(el, row.chart);
      else if (field in FORMATS) el.textContent = FORMATS[field](row[field]);
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
