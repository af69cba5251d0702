// Keeps the words beside an admin seconds field ("1 day") in step with what is typed.
(function () {
  "use strict";
  const words = window.taskhoster.secondsInWords;  // words.js, loaded first
  function update(input) {
    const target = document.getElementById(input.dataset.secondsWords);
    const value = Number(input.value);
    if (target) target.textContent = input.value !== "" && Number.isInteger(value) && value >= 0 ? words(value) : "";
  }
  document.addEventListener("input", function (event) {
    if (event.target.matches && event.target.matches("input[data-seconds-words]")) update(event.target);
  });
})();
