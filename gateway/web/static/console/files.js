// Every Markdown file of the person's memory, grouped the way docs/memory.md describes them.
import { get, enc } from "./api.js";
import { bytes, empty, h, when } from "./dom.js";

// [server kind, title, path test used when the server names no kind]
const GROUPS = [
  ["profile", "Profile", (p) => p === "USER.md" || p === "PATTERNS.md"],
  ["working", "Working memory", (p) => p === "WORKING.md"],
  ["people", "People", (p) => p.startsWith("people/")],
  ["topics", "Topics", (p) => p.startsWith("topics/")],
  ["dated", "Dated memories", (p) => p.startsWith("memories/")],
  ["distilled", "Distillation tiers", (p) => /^MEMORY_(SHORT|MID|LONG)\.md$/.test(p)],
  ["session_log", "Session logs", (p) => p.startsWith("sessions/")],
  ["other", "Other files", (p) => !p.endsWith(".jsonl") && !p.startsWith("_history/")],
  ["kept", "Kept by kith (read only)", () => true],
];
const KEPT = new Set(["audit", "backup", "quarantine"]);

export function groupOf(file) {
  if (KEPT.has(file.kind)) return "kept";
  if (file.kind && GROUPS.some(([key]) => key === file.kind)) return file.kind;
  return GROUPS.find(([, , test]) => test(file.path))[0];
}

export function expiryBadge(expires) {
  if (!expires) return null;
  const past = new Date(String(expires).replace(" ", "T")) < new Date();
  return h("span", { class: "badge " + (past ? "bad" : "warn") }, (past ? "expired " : "expires ") + when(expires));
}

export async function filesView(ctx) {
  const { files } = await get(`/api/users/${enc(ctx.uid)}/memory/files`);
  const byGroup = new Map(GROUPS.map(([key]) => [key, []]));
  for (const f of files) byGroup.get(groupOf(f)).push(f);
  const sections = GROUPS.map(([key, title]) => {
    const list = byGroup.get(key);
    if (!list.length && !["profile", "working", "people", "topics", "dated"].includes(key)) return null;
    list.sort((a, b) => (key === "dated" || key === "session_log") ? b.path.localeCompare(a.path) : a.path.localeCompare(b.path));
    return h("section", { class: "group", "aria-labelledby": "g-" + key },
      h("h3", { id: "g-" + key }, title, h("span", { class: "count" }, String(list.length))),
      list.length
        ? h("ul", { class: "files" }, list.map((f) => h("li", {},
            h("a", { href: ctx.link("file", f.path) }, f.path),
            h("span", { class: "meta" }, bytes(f.size), " · ", when(f.modified)),
            expiryBadge(f.expires))))
        : empty(key === "working" ? "No working memory yet: it is written when a long conversation is compacted." : "Nothing here yet."));
  });
  return h("section", {}, h("h2", {}, "What kith remembers"),
    h("p", { class: "muted" }, `${files.length} files. Open one to read or edit it; every edit is audited.`),
    h("div", { class: "groups" }, sections));
}
