// A number of seconds in words ("1 day 2 hours"), the same as queues/durations.py writes on the
// server; shared by the dashboard's refresh and the admin's seconds fields.
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
