// The colour scheme, applied before the page is first drawn (a classic script in <head>, not a module, so it runs
// before the body is parsed): the visitor's own choice (the toggle in looks.js keeps it in localStorage), else the
// system's, which style.css follows by prefers-color-scheme.
(function () {
  try {
    const chosen = localStorage.getItem("agent-gateway.theme");
    if (chosen === "light" || chosen === "dark") document.documentElement.dataset.theme = chosen;
  } catch (_) {
    // No storage (a locked-down profile): the system's scheme.
  }
}());
