// Keeps the words beside an admin seconds field ("1 day") in step with what is typed.
(function () {
  "use strict";
  const UNITS = [[86400, "day", "days"], [3600, "hour", "hours"], [60, "min", "min"], [1, "s", "s"]];
  function words(seconds) {
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
  function update(input) {
    const target = document.getElementById(input.dataset.secondsWords);
    const value = Number(input.value);
    if (target) target.textContent = input.value !== "" && Number.isInteger(value) && value >= 0 ? words(value) : "";
  }
  document.addEventListener("input", function (event) {
    if (event.target.matches && event.target.matches("input[data-seconds-words]")) update(event.target);
  });
})();
