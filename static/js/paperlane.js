// Behaviour of the member pages, from a file: the Content-Security-Policy runs no inline
// script or event attribute.
document.addEventListener("change", (event) => {
  // A choice that takes effect at once (the organisation switcher).
  if (event.target.matches("select[data-submit-on-change]")) {
    event.target.form.requestSubmit();
  }
});
