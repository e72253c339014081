// Behaviour of the member pages, from a file: the Content-Security-Policy runs no inline
// script or event attribute. Every page works without it; this only makes it quicker.
document.documentElement.classList.add("js");

document.addEventListener("change", (event) => {
  // A choice that takes effect at once (the organisation switcher).
  if (event.target.matches("select[data-submit-on-change]")) {
    event.target.form.requestSubmit();
  }
});

document.addEventListener("click", (event) => {
  // A copy button copies the text of the field it names (a new token's secret).
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const field = document.getElementById(button.dataset.copy);
  const said = button.parentElement.querySelector("[data-copied]");
  const done = (words) => { if (said) said.textContent = words; };
  field.focus();
  field.select();
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(field.value).then(
      () => done("Copied."),
      () => done("Selected: press Ctrl+C (⌘C) to copy."),
    );
  } else {
    done("Selected: press Ctrl+C (⌘C) to copy.");
  }
});

document.addEventListener("focusin", (event) => {
  if (event.target.matches("input[data-select-on-focus]")) event.target.select();
});
