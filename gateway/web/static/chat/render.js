// Markdown replies: markdown-it renders (raw HTML off), DOMPurify sanitizes, then links are made safe
// and code blocks get a copy button. Until the libraries load (or if they cannot), text is shown as is.

let md = null;
let purify = null;

// Only links a person can follow safely leave the page; everything else loses its href.
const SAFE_URL = /^(?:https?:|mailto:)/i;

export const ready = Promise.all([
  import("/static/vendor/markdown-it.mjs"),
  import("/static/vendor/purify.mjs"),
]).then(([markdownit, dompurify]) => {
  md = markdownit.default({ html: false, linkify: true, breaks: true, typographer: false });
  // Images would load from anywhere (tracking pixels, and CSP blocks them anyway): show them as links.
  md.renderer.rules.image = (tokens, idx) => {
    const token = tokens[idx];
    const src = md.utils.escapeHtml(token.attrGet("src") || "");
    const alt = md.utils.escapeHtml(token.content || token.attrGet("src") || "image");
    return `<a href="${src}">${alt}</a>`;
  };
  purify = dompurify.default;
}).catch((err) => {
  console.warn("kith: Markdown libraries unavailable, showing plain text", err);
});

export function available() { return md !== null && purify !== null; }

export function renderMarkdown(target, text) {
  if (!available()) {
    target.classList.add("plain");
    target.textContent = text;
    return;
  }
  target.classList.remove("plain");
  const fragment = purify.sanitize(md.render(text), {
    RETURN_DOM_FRAGMENT: true,
    FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "img", "svg", "math", "iframe"],
    FORBID_ATTR: ["style", "class", "id", "target"],
    ALLOWED_URI_REGEXP: SAFE_URL,
  });
  decorate(fragment);
  target.replaceChildren(fragment);
}

function decorate(root) {
  for (const a of root.querySelectorAll("a")) {
    const href = a.getAttribute("href");
    if (!href || !SAFE_URL.test(href)) {
      a.removeAttribute("href");
      a.classList.add("dead-link");
      a.title = "link removed: only http, https and mailto links are followed";
      continue;
    }
    a.target = "_blank";
    a.rel = "noopener noreferrer";
  }
  for (const table of root.querySelectorAll("table")) {
    const wrap = document.createElement("div");
    wrap.className = "table-wrap";
    table.replaceWith(wrap);
    wrap.appendChild(table);
  }
  for (const pre of root.querySelectorAll("pre")) {
    const wrap = document.createElement("div");
    wrap.className = "code";
    const copy = document.createElement("button");
    copy.type = "button";
    copy.className = "copy";
    copy.textContent = "Copy";
    copy.setAttribute("aria-label", "Copy code");
    pre.replaceWith(wrap);
    wrap.append(copy, pre);
  }
}

// One listener for every copy button, present and future.
export function installCopyHandler(root) {
  root.addEventListener("click", async (event) => {
    const button = event.target.closest("button.copy");
    if (!button) return;
    const code = button.parentElement.querySelector("pre")?.textContent ?? "";
    const ok = await copyText(code);
    button.textContent = ok ? "Copied" : "Copy failed";
    setTimeout(() => { button.textContent = "Copy"; }, 1500);
  });
}

// True when ``text`` is on the clipboard.
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return fallbackCopy(text);
  }
}

function fallbackCopy(text) {
  // navigator.clipboard needs a secure context; a plain-http LAN address is not one.
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.appendChild(area);
  area.select();
  let ok = false;
  try { ok = document.execCommand("copy"); } catch { ok = false; }
  area.remove();
  return ok;
}
