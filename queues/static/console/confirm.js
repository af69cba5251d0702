// A form with data-confirm asks before it submits (a delete cannot be undone). Without
// JavaScript the form submits at once; the server's checks are the same either way.
document.addEventListener("submit", (event) => {
  const question = event.target.dataset ? event.target.dataset.confirm : undefined;
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
