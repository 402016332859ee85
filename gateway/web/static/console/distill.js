// The distillation tiers (MEMORY_SHORT / MID / LONG): the last run of each and the digest itself.
import { enc, encPath, get } from "./api.js";
import { empty, h, when } from "./dom.js";
import { markdown } from "./render.js";

const ABOUT = { short: "recent days, rebuilt each night", mid: "weekly themes and decisions", long: "the big picture, monthly" };

export async function distillView(ctx) {
  const { tiers } = await get(`/api/users/${enc(ctx.uid)}/distill`);
  const texts = await Promise.all(tiers.map((t) => (t.exists
    ? get(`/api/users/${enc(ctx.uid)}/memory/files/${encPath(t.file)}`).then((f) => f.text).catch(() => null)
    : Promise.resolve(null))));
  return h("section", { class: "distill" }, h("h2", {}, "Distillation tiers"),
    h("p", { class: "muted" }, "Digests of your conversations that the assistant reads, from the most recent to the big picture."),
    tiers.length ? h("div", { class: "tiers" }, tiers.map((t, i) => h("article", { class: "tier card" },
      h("h3", {}, t.tier, " ", h("span", { class: "meta" }, ABOUT[t.tier] || "")),
      h("p", { class: "meta" }, "last run: ", t.status ? h("span", { class: "badge " + (t.status === "failed" ? "bad" : "ok") }, t.status) : "never",
        t.finished_at || t.started_at ? " " + when(t.finished_at || t.started_at) : "", t.detail ? ` · ${t.detail}` : ""),
      h("p", {}, t.exists ? h("a", { href: ctx.link("file", t.file) }, t.file) : h("span", { class: "muted" }, t.file),
        t.exists && t.modified ? h("span", { class: "meta" }, " · updated " + when(t.modified)) : null),
      texts[i] ? h("div", { class: "digest" }, markdown(texts[i])) : empty(t.exists ? "Empty." : "Not written yet.")))) : empty("No distillation tiers."));
}
