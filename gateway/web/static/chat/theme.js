// The header's theme toggle: as the system -> light -> dark -> as the system. The choice is kept in
// localStorage ("kith.theme") and applied before the first paint by /static/theme.js.

const KEY = "kith.theme";
const ORDER = ["", "light", "dark"]; // "" = as the system
const NAMES = { "": "as the system", light: "light", dark: "dark" };

export function currentTheme() {
  const t = document.documentElement.dataset.theme || "";
  return ORDER.includes(t) ? t : "";
}

export function setTheme(theme) {
  const root = document.documentElement;
  if (theme) root.dataset.theme = theme;
  else delete root.dataset.theme;
  try {
    if (theme) localStorage.setItem(KEY, theme);
    else localStorage.removeItem(KEY);
  } catch { /* storage blocked: the choice lasts until the page closes */ }
}

export function setupThemeToggle(button) {
  const label = () => {
    const now = currentTheme();
    const next = ORDER[(ORDER.indexOf(now) + 1) % ORDER.length];
    button.setAttribute("aria-label", `Theme: ${NAMES[now]}`);
    button.title = `Theme: ${NAMES[now]} (click for ${NAMES[next]})`;
  };
  button.addEventListener("click", () => {
    setTheme(ORDER[(ORDER.indexOf(currentTheme()) + 1) % ORDER.length]);
    label();
  });
  // Another tab changed it: follow.
  window.addEventListener("storage", (e) => {
    if (e.key !== KEY) return;
    const t = e.newValue === "light" || e.newValue === "dark" ? e.newValue : "";
    if (t) document.documentElement.dataset.theme = t;
    else delete document.documentElement.dataset.theme;
    label();
  });
  label();
}
