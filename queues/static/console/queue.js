// The queue page: a "select every task on this page" box, the bulk buttons that need a ticked
// task, and the bulk actions' next chunk sent on by itself. Everything works without it too.
(function () {
  "use strict";
  var next = document.querySelector("form[data-autosubmit]");
  if (next) {
    next.submit();
    return;
  }
  var form = document.getElementById("bulk");
  if (!form) return;
  var all = document.getElementById("pick-all");
  var boxes = Array.prototype.slice.call(form.querySelectorAll('input[name="ids"]'));
  var needing = form.querySelectorAll("[data-needs-selection]");
  function update() {
    var ticked = boxes.filter(function (b) { return b.checked; }).length;
    for (var i = 0; i < needing.length; i++) needing[i].disabled = ticked === 0;
    if (all) {
      all.checked = ticked > 0 && ticked === boxes.length;
      all.indeterminate = ticked > 0 && ticked < boxes.length;
    }
  }
  if (all) {
    all.hidden = false;
    all.addEventListener("change", function () {
      boxes.forEach(function (b) { b.checked = all.checked; });
      update();
    });
  }
  boxes.forEach(function (b) { b.addEventListener("change", update); });
  update();
})();
