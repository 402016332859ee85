// "What the assistant saw" for one past turn: the `kith context` view of docs/memory.md.
import { enc, get } from "./api.js";
import { empty, h } from "./dom.js";

const num = (n) => (typeof n === "number" ? n.toLocaleString() : "–");

export async function turnView(ctx) {
  const c = await get(`/api/users/${enc(ctx.uid)}/turns/${enc(ctx.arg)}/context`);
  const sections = c.sections || [];
  const trims = c.trims || [];
  const messages = c.messages || [];
  const total = (c.system_tokens ?? sections.reduce((a, s) => a + (s.tokens || 0), 0)) + (c.message_tokens ?? 0);
  return h("section", { class: "turn" },
    h("p", { class: "crumbs" }, h("a", { href: ctx.link("sessions") }, "Sessions"), " / turn ", String(ctx.arg).slice(-8)),
    h("h2", {}, "What the assistant saw"),
    h("dl", { class: "summary" },
      h("dt", {}, "Context budget"), h("dd", {}, num(c.budget_tokens), " tokens"),
      h("dt", {}, "System sections"), h("dd", {}, num(c.system_tokens), " tokens in ", String(sections.length), " sections"),
      h("dt", {}, "Conversation"), h("dd", {}, num(c.message_tokens), " tokens in ", String(messages.length), " messages"),
      h("dt", {}, "Total"), h("dd", {}, num(total), " tokens"),
      c.tier != null ? [h("dt", {}, "Tier"), h("dd", {}, String(c.tier))] : null,
      c.note ? [h("dt", {}, "Note"), h("dd", {}, c.note)] : null),
    h("h3", {}, "Sections"),
    sections.length ? h("table", { class: "sections" },
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Section"), h("th", { scope: "col" }, "Tokens"), h("th", { scope: "col" }, "Notes"))),
      h("tbody", {}, sections.map((s) => h("tr", { class: s.trimmed_from ? "trimmed" : "" },
        h("td", {}, h("details", {}, h("summary", {}, s.title || s.source), h("pre", { class: "section-text" }, s.text || ""))),
        h("td", { class: "num" }, num(s.tokens)),
        h("td", {}, [s.cached ? h("span", { class: "badge" }, "cached") : null, s.protected ? h("span", { class: "badge" }, "protected") : null,
          s.as_data ? h("span", { class: "badge" }, "as data") : null,
          s.trimmed_from ? h("span", { class: "badge warn" }, `trimmed from ${num(s.trimmed_from)}`) : null]))))) : empty("No system sections."),
    h("h3", {}, "Trimmed"),
    trims.length ? h("ul", { class: "trims" }, trims.map((t) => h("li", {}, h("strong", {}, t.source), `: ${num(t.before)} → ${num(t.after)} tokens`, t.reason ? ` (${t.reason})` : "")))
      : h("p", { class: "muted" }, "Nothing was trimmed: everything fit the budget."),
    h("h3", {}, "Messages"),
    messages.length ? h("ol", { class: "transcript" }, messages.map((m) => h("li", { class: "msg-row " + m.role },
      h("div", { class: "meta" }, m.role, " · ", num(m.tokens), " tokens"),
      h("pre", { class: "msg-text" }, typeof m.content === "string" ? m.content : JSON.stringify(m.content, null, 2))))) : null);
}
