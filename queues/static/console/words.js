// A number of seconds in words ("1 day 2 hours") while an admin types it in a seconds field:
// the one place the words are made off the server. Every page carries the server's words
// (queues/durations.py); tests/browser/test_console_browser.py holds the two to the same table.
(function () {
  "use strict";
  const UNITS = [[86400, "day", "days"], [3600, "hour", "hours"], [60, "min", "min"], [1, "s", "s"]];
  function secondsInWords(seconds) {
    const parts = [];
    let rest = seconds;
    for (const [size, one, many] of UNITS) {
      const count = Math.floor(rest / size);
      rest -= count * size;
      if (count) parts.push(count + " " + (count === 1 ? one : many));
      if (parts.length === 2) break;
    }
    return parts.join(" ") || "0 s";
  }
  window.taskhoster = Object.assign(window.taskhoster || {}, { secondsInWords });
})();
