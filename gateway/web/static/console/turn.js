// "What the assistant saw" for one past turn: the sections of its prompt with their token counts and
// what the budgeter trimmed (the record kept at the time, as `kith context` shows it for a new message).
import { enc, get } from "./api.js";
import { empty, h, when } from "./dom.js";

const num = (n) => (typeof n === "number" ? n.toLocaleString() : "–");

// The recall filter tier's decision (docs/memory.md): used, timeout, error or off, and what it kept.
const FILTER = { used: "chose", timeout: "timed out: the usual ranking was used", error: "failed: the usual ranking was used", off: "off" };
function filterText(f) {
  const head = FILTER[f.outcome] || f.outcome;
  if (f.outcome === "off") return head;
  return `${head} · ${Math.round(f.latency_ms)} ms · kept ${(f.kept || []).length} of ${f.candidates}` + (f.reason ? ` · ${f.reason}` : "");
}

export async function turnView(ctx) {
  const c = await get(`/api/users/${enc(ctx.uid)}/turns/${enc(ctx.arg)}/context`);
  const sections = c.sections || [];
  const trims = c.trims || [];
  const total = (c.system_tokens || 0) + (c.history_tokens || 0) + (c.message_tokens || 0);
  const back = c.session_id ? ctx.link("session", c.session_id) : ctx.link("sessions");
  return h("section", { class: "turn" },
    h("p", { class: "crumbs" }, h("a", { href: back }, "Session"), " / turn ", String(ctx.arg).slice(-8)),
    h("h2", {}, "What the assistant saw"),
    h("dl", { class: "summary" },
      c.at ? [h("dt", {}, "When"), h("dd", {}, when(c.at))] : null,
      c.channel ? [h("dt", {}, "Channel"), h("dd", {}, c.channel)] : null,
      c.persona ? [h("dt", {}, "Persona"), h("dd", {}, c.persona)] : null,
      c.tier != null ? [h("dt", {}, "Context tier"), h("dd", {}, String(c.tier))] : null,
      h("dt", {}, "Budget"), h("dd", {}, num(c.budget_tokens), " tokens"),
      h("dt", {}, "Sections"), h("dd", {}, num(c.system_tokens), " tokens in ", String(sections.length), " sections"),
      h("dt", {}, "History"), h("dd", {}, num(c.history_tokens), " tokens in ", num(c.history_messages), " messages"),
      h("dt", {}, "The message"), h("dd", {}, num(c.message_tokens), " tokens"),
      h("dt", {}, "Total"), h("dd", {}, h("strong", {}, num(total)), " tokens"),
      c.recall_filter ? [h("dt", {}, "Recall filter"), h("dd", {}, filterText(c.recall_filter))] : null),
    h("h3", {}, "Sections, in prompt order"),
    sections.length ? h("table", { class: "sections" },
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Section"), h("th", { scope: "col" }, "Tokens"), h("th", { scope: "col" }, "Notes"))),
      h("tbody", {}, sections.map((s) => {
        const trim = trims.find((t) => t.source === s.source);
        return h("tr", { class: trim ? "trimmed" : "" },
          h("td", {}, s.title || s.source, s.title && s.source ? h("div", { class: "meta" }, s.source) : null,
            s.text ? h("details", {}, h("summary", {}, "text"), h("pre", { class: "section-text" }, s.text)) : null),
          h("td", { class: "num" }, num(s.tokens)),
          h("td", {}, [s.cached ? h("span", { class: "badge" }, "cached") : null,
            s.protected ? h("span", { class: "badge", title: "never trimmed" }, "protected") : null,
            s.as_data ? h("span", { class: "badge" }, "quoted data") : null,
            trim ? h("span", { class: "badge warn", title: "trimmed to fit the budget" }, `cut from ${num(trim.before)}`) : null]));
      }))) : empty("No sections were recorded."),
    h("h3", {}, "Trimmed to fit the budget"),
    trims.length ? h("ul", { class: "trims" }, trims.map((t) => h("li", {}, h("strong", {}, t.source),
      `: ${num(t.before)} → ${num(t.after)} tokens`, t.reason ? ` (${t.reason})` : "")))
      : h("p", { class: "muted" }, "Nothing was trimmed: everything fit the budget."));
}
