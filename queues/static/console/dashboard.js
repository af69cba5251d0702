// Refreshes the dashboard's counts in place; a static file, so the CSP needs no inline script.
(function () {
  "use strict";
  const table = document.getElementById("queues");
  if (!table) return;
  function age(ms) {
    if (ms < 1000) return ms + " ms";
    if (ms < 120000) return Math.round(ms / 1000) + " s";
    if (ms < 7200000) return Math.round(ms / 60000) + " min";
    return Math.round(ms / 3600000) + " h";
  }
  function show(rows) {
    for (const row of rows) {
      const tr = table.querySelector(`tr[data-queue="${CSS.escape(row.host + "/" + row.queue)}"]`);
      if (!tr) continue;
      for (const cell of tr.querySelectorAll("[data-field]")) {
        const field = cell.dataset.field;
        if (field === "paused") cell.textContent = row.paused ? "paused" : "running";
        else if (field === "oldest_pending_ms") cell.textContent = age(row[field]);
        else cell.textContent = String(row[field]);
      }
    }
  }
  async function refresh() {
    try {
      const response = await fetch(table.dataset.source, { credentials: "same-origin" });
      if (response.ok) show((await response.json()).queues);
    } catch (error) {
      // A missed refresh is harmless: the next one tries again.
    }
  }
  for (const cell of table.querySelectorAll('[data-field="oldest_pending_ms"]')) {
    cell.textContent = age(Number(cell.dataset.ms));
  }
  setInterval(refresh, 2000);
})();
