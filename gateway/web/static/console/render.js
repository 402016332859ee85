// Markdown from memory files, through the chat page's vendored markdown-it and DOMPurify (never by hand).
import { h } from "./dom.js";

const SAFE_URL = /^(?:https?:|mailto:)/i;
let ready = null;
let md = null;
let purify = null;

// Loaded once, lazily: if the vendored files are missing (no `npm ci`), the console still works in plain text.
export function loadRenderer() {
  if (!ready) {
    ready = Promise.all([import("/static/vendor/markdown-it.mjs"), import("/static/vendor/purify.mjs")])
      .then(([mdMod, purifyMod]) => {
        // html: false: memory text that looks like HTML stays text; DOMPurify is the second wall.
        md = mdMod.default({ html: false, linkify: true, breaks: true, typographer: false });
        purify = purifyMod.default;
        purify.addHook("afterSanitizeAttributes", (node) => {
          if (node.tagName !== "A") return;
          // Only links a person can follow safely stay links; they open outside the console.
          if (!SAFE_URL.test(node.getAttribute("href") || "")) node.removeAttribute("href");
          node.setAttribute("target", "_blank"); node.setAttribute("rel", "noopener noreferrer");
        });
      })
      .catch((err) => { console.warn("markdown renderer unavailable, showing plain text", err); md = null; });
  }
  return ready;
}

// Markdown -> sanitised DOM; plain text when the renderer could not load.
export function markdown(text) {
  const box = h("div", { class: "md" });
  if (md && purify) {
    // kith's own markers (<!-- kith:turn ... -->) are for its parsers, not for people.
    const shown = String(text || "").replace(/<!--[\s\S]*?-->\n?/g, "");
    box.innerHTML = purify.sanitize(md.render(shown), { USE_PROFILES: { html: true } });
  } else {
    box.append(h("pre", { class: "plain" }, String(text || "")));
  }
  return box;
}
