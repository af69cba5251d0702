// The admin writes a moment as the console does ("2026-12-01 19:58:07 UTC":
// taskhoster_site/formats/en/formats.py); on hover it says how long ago that was, as the
// console's "2 min ago" says its exact time on hover. The words are the server's ago()
// (queues/templatetags/readable.py): the largest unit, "just now" within 5 s.
(function () {
  "use strict";
  const words = window.taskhoster.secondsInWords;  // words.js, loaded first
  const MOMENT = /^(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) UTC$/;

  function ago(ms, now) {
    const delta = now - ms;
    if (Math.abs(delta) < 5000) return "just now";
    const text = words(Math.floor(Math.abs(delta) / 1000)).split(" ").slice(0, 2).join(" ");
    return delta > 0 ? text + " ago" : "in " + text;
  }

  const content = document.getElementById("content");
  if (!content) return;
  const now = Date.now();
  const walker = document.createTreeWalker(content, NodeFilter.SHOW_TEXT);
  const found = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const match = MOMENT.exec(node.nodeValue.trim());
    if (match && node.parentElement.closest("time, textarea, script") === null) found.push([node, match]);
  }
  for (const [node, match] of found) {
    const [, y, mo, d, h, mi, s] = match.map(Number);
    const ms = Date.UTC(y, mo - 1, d, h, mi, s);
    const time = document.createElement("time");
    time.dateTime = new Date(ms).toISOString();
    time.title = ago(ms, now);
    time.textContent = node.nodeValue.trim();
    node.replaceWith(time);
  }
})();
