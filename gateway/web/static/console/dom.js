// Small DOM helpers. Server text only ever becomes a text node here; Markdown goes through render.js.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function mount(parent, ...children) {
  parent.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return parent;
}

export function toast(text, kind = "info") {
  const el = document.getElementById("toast");
  el.textContent = text; el.className = "toast " + kind; el.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { el.hidden = true; }, 4000);
}

export function when(iso) {
  if (iso === undefined || iso === null || iso === "") return "";
  if (typeof iso === "string" && /^\d{4}-\d\d-\d\d$/.test(iso)) return iso;
  let d;
  if (typeof iso === "number") d = new Date(iso * 1000);
  else {
    let s = String(iso).trim().replace(" ", "T");
    if (!/(Z|[+-]\d\d:?\d\d)$/i.test(s)) s += "Z"; // the server stores naive UTC
    d = new Date(s.replace(/(\.\d{3})\d+/, "$1"));
  }
  if (Number.isNaN(d.getTime())) return String(iso);
  return d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

export function bytes(n) {
  if (n == null) return "";
  return n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KB` : `${(n / 1048576).toFixed(1)} MB`;
}

export function errorBox(err) {
  const msg = err && err.message ? err.message : String(err);
  return h("p", { class: "error", role: "alert" }, msg);
}

export function loading() { return h("p", { class: "muted" }, "Loading…"); }

export function empty(text) { return h("p", { class: "muted empty" }, text); }
