// Files in a message (docs/web.md#attachments): a thumbnail for an image, a chip for anything else.
// A stored message names its files as Markdown links into the person's tree, one a line at its end
// (`[photo.png](media/2026/11/3fa2c1d0e9b8-photo.png)`, gateway/media/pipeline.py); they are served by
// GET /api/users/{uid}/media/{path}, to the person alone. While a message is being sent, the files
// are still on this device: images are shown from the file itself.
import { userPath } from "./api.js";

// One link line as the pipeline writes it; the path is the store's safe name (media/store.py).
const LINK = /^\[([^\]\n]{1,300})\]\((media\/[A-Za-z0-9._/-]{1,400})\)$/;
const IMAGE = /\.(?:png|jpe?g|gif|webp)$/i;
const THUMB_BYTES = 8 * 1024 * 1024; // a bigger photo shows as a chip while it is sent (no huge data: URL)

// The text a person wrote, and the files the message carried: {text, files: [{name, path}]}.
export function splitFiles(text) {
  const lines = (text || "").split("\n");
  const files = [];
  while (lines.length) {
    const last = lines[lines.length - 1].trim();
    const m = LINK.exec(last);
    if (m && !m[2].split("/").includes("..")) {
      files.unshift({ name: m[1], path: m[2] });
      lines.pop();
    } else if (last === "" && files.length) {
      lines.pop();
    } else {
      break;
    }
  }
  return { text: lines.join("\n"), files };
}

export function mediaUrl(path) {
  return userPath(`/media/${path.split("/").map(encodeURIComponent).join("/")}`);
}

// The strip under a message's text. `files` are stored ({name, path}) or local ({name, file}).
export function fileStrip(files) {
  const strip = document.createElement("div");
  strip.className = "msg-files";
  for (const f of files) strip.append(f.file ? localItem(f) : storedItem(f));
  return strip;
}

function storedItem({ name, path }) {
  const url = mediaUrl(path);
  if (!IMAGE.test(path)) return chip(name, url);
  const link = document.createElement("a");
  link.className = "thumb";
  link.href = url;
  link.target = "_blank";
  link.rel = "noopener";
  link.title = name;
  const img = document.createElement("img");
  img.src = url;
  img.alt = name;
  img.loading = "lazy";
  img.decoding = "async";
  // Gone (forgotten), not an image after all, or no cookie to send (the operator token alone): a chip.
  img.addEventListener("error", () => link.replaceWith(chip(name, url)), { once: true });
  link.append(img);
  return link;
}

function localItem({ name, file }) {
  const label = name || "pasted image";
  if (!file.type.startsWith("image/") || file.size > THUMB_BYTES) return chip(label, null);
  const box = document.createElement("span");
  box.className = "thumb";
  box.title = label;
  const img = document.createElement("img");
  img.alt = label;
  box.append(img);
  // A data: URL (the page's CSP allows data: images, not blob:), read off the main path.
  const reader = new FileReader();
  reader.addEventListener("load", () => { img.src = String(reader.result); });
  reader.addEventListener("error", () => box.replaceWith(chip(label, null)));
  reader.readAsDataURL(file);
  return box;
}

function chip(name, url) {
  const el = document.createElement(url ? "a" : "span");
  el.className = "file-chip";
  if (url) {
    el.href = url;
    el.download = name;
  }
  el.title = name;
  const icon = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  icon.setAttribute("viewBox", "0 0 24 24");
  icon.setAttribute("aria-hidden", "true");
  const shape = document.createElementNS("http://www.w3.org/2000/svg", "path");
  shape.setAttribute("d", "M6 3h8l4 4v14H6zM14 3v4h4");
  icon.append(shape);
  const label = document.createElement("span");
  label.textContent = name;
  el.append(icon, label);
  return el;
}
