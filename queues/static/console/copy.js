// A "Copy" button beside a text shown once (a new token): it copies the element named by its
// data-copy and says it did. Without the clipboard API (a page not served over https), the text
// is selected for the user's own Ctrl+C, and the button says so.
document.querySelectorAll("button[data-copy]").forEach((button) => {
  const source = document.getElementById(button.dataset.copy);
  const said = document.getElementById(button.dataset.copy + "-copied");
  if (!source) return;
  button.hidden = false;
  button.addEventListener("click", async () => {
    const text = source.textContent.trim();
    try {
      await navigator.clipboard.writeText(text);
      said.textContent = "Copied.";
    } catch (error) {
      const range = document.createRange();
      range.selectNodeContents(source);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      said.textContent = "Selected: press Ctrl+C (⌘C) to copy.";
    }
  });
});
