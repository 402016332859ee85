// The distillation tiers (MEMORY_SHORT / MID / LONG): schedule, last run and the digest itself.
import { enc, get } from "./api.js";
import { empty, h, when } from "./dom.js";
import { markdown } from "./render.js";

const TIER_FILES = { short: "MEMORY_SHORT.md", mid: "MEMORY_MID.md", long: "MEMORY_LONG.md" };

function tiersOf(data) {
  const t = data && (data.tiers || data);
  if (Array.isArray(t)) return t;
  return Object.entries(t || {}).filter(([, v]) => v && typeof v === "object" && !Array.isArray(v))
    .map(([name, v]) => ({ name, ...v }));
}

export async function distillView(ctx) {
  const data = await get(`/api/users/${enc(ctx.uid)}/distill`);
  const tiers = tiersOf(data);
  const runs = Array.isArray(data && data.runs) ? data.runs : [];
  return h("section", { class: "distill" }, h("h2", {}, "Distillation tiers"),
    h("p", { class: "muted" }, "Digests of your conversations: short (recent days), mid (weekly themes), long (the big picture)."),
    tiers.length ? h("div", { class: "tiers" }, tiers.map((t) => {
      const file = t.file || TIER_FILES[t.name] || "";
      const last = t.last_run || runs.filter((r) => r.tier === t.name).sort((a, b) => String(b.finished_at || b.started_at || b.ts || "").localeCompare(String(a.finished_at || a.started_at || a.ts || "")))[0];
      const text = t.text ?? t.content;
      return h("article", { class: "tier card" },
        h("h3", {}, t.name, " ", h("span", { class: "badge " + (t.enabled === false ? "" : "ok") }, t.enabled === false ? "off" : "on")),
        h("p", { class: "meta" }, t.cron ? "schedule " + t.cron : "", t.backend ? ` · model ${t.backend}` : "",
          t.budget_tokens ? ` · ${t.budget_tokens} tokens` : ""),
        last ? h("p", { class: "meta" }, "last run: ", h("span", { class: "badge" }, last.status || "?"), " ",
          when(last.finished_at || last.started_at || last.ts)) : h("p", { class: "meta" }, "never run"),
        file ? h("p", {}, h("a", { href: ctx.link("file", file) }, file), t.exists === false || (t.exists === undefined && text == null && t.size == null) ? "" : "") : null,
        text ? h("div", { class: "digest" }, markdown(text)) : (t.exists === false ? empty("Not written yet.") : null));
    })) : empty("No distillation tiers configured."));
}
