// Keeps a page's live part fresh: every data-live-every seconds the page is fetched again and
// the element with id workers-live (or any [data-live-every] element, by its id) takes the new
// one's content. A static file, so the CSP needs no inline script; the markup comes from the
// same server and template that drew the page, parsed as an inert document.
(function () {
  "use strict";
  const live = document.querySelector("[data-live-every]");
  if (!live || !live.id) return;
  const everyMs = Math.max(Number(live.dataset.liveEvery) || 5, 1) * 1000;
  async function refresh() {
    if (!document.hidden) {
      try {
        const response = await fetch(window.location.href, { credentials: "same-origin" });
        if (response.ok) {
          const page = new DOMParser().parseFromString(await response.text(), "text/html");
          const fresh = page.getElementById(live.id);
          if (fresh) live.replaceChildren(...fresh.childNodes);
        }
      } catch (error) {
        // A missed refresh is harmless: the next one tries again.
      }
    }
    setTimeout(refresh, everyMs);
  }
  setTimeout(refresh, everyMs);
})();
