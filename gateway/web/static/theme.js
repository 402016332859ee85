// The theme the person chose with the header's toggle (chat/theme.js), on <html> before the first
// paint. A classic script, not a module: modules are deferred, and the page would flash the system's
// theme first. No choice stored: the system's setting (prefers-color-scheme) decides.
(function () {
  try {
    const theme = localStorage.getItem("kith.theme");
    if (theme === "light" || theme === "dark") document.documentElement.dataset.theme = theme;
  } catch { /* storage blocked: the system's theme */ }
})();
