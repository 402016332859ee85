// The approval audit (docs/tools.md#approvals): every step of a tool call that waited for a person's
// approval, newest first. The operator sees everyone's and filters by person and outcome; a person sees
// their own. The summary is what the person was shown; a long one (a whole mail) opens on demand.
import { enc, get } from "./api.js";
import { empty, errorBox, h, mount, when } from "./dom.js";

const OUTCOMES = ["requested", "approved", "denied", "expired", "refused", "done", "failed", "always allowed"];
const TONE = { done: "ok", approved: "ok", "always allowed": "ok", denied: "bad", refused: "bad", failed: "bad", expired: "warn" };
const PAGE = 50;

function summary(text) {
  const lines = (text || "").split("\n");
  const first = lines[0] || "";
  if (lines.length === 1 && first.length <= 160) return h("span", { class: "summary-text" }, first);
  return h("details", { class: "summary-text" },
    h("summary", {}, first.length > 160 ? first.slice(0, 159) + "…" : first),
    h("pre", { class: "plain" }, text));
}

function row(e, operator) {
  return h("tr", { dataset: { entry: e.id, outcome: e.outcome } },
    h("td", { class: "at" }, h("time", { datetime: e.at, title: new Date(e.at).toLocaleString() }, when(e.at))),
    operator ? h("td", { class: "person", title: e.user_id }, e.display_name || e.user_id) : null,
    h("td", { class: "tool" }, h("code", {}, e.tool)),
    h("td", { class: "outcome" }, h("span", { class: "badge " + (TONE[e.outcome] || "") }, e.outcome),
      e.note ? h("span", { class: "meta note" }, " " + e.note) : null,
      h("span", { class: "meta id" }, " " + e.approval_id)),
    h("td", { class: "summary" }, summary(e.summary)));
}

function select(label, name, options) {
  return h("label", { class: "filter" }, label,
    h("select", { name }, options.map(([value, text]) => h("option", { value }, text))));
}

export async function approvalsView(ctx) {
  const operator = ctx.me.operator;
  const filters = [];
  if (operator) {
    let users = [];
    try { users = (await get("/api/users")).users || []; } catch { /* the list still works without names */ }
    filters.push(select("Person", "user", [["", "Everyone"], ...users.map((u) => [u.user_id, u.display_name || u.user_id])]));
  }
  filters.push(select("Outcome", "outcome", [["", "Any"], ...OUTCOMES.map((o) => [o, o])]));
  const form = h("form", { class: "approval-filters", "aria-label": "Filter the approvals" }, filters);
  // The operator who picked a person at the top (#/<uid>/approvals) starts with that person's steps.
  const picked = form.querySelector("select[name=user]");
  if (picked && ctx.uid !== "me" && [...picked.options].some((o) => o.value === ctx.uid)) picked.value = ctx.uid;
  const body = h("tbody");
  const table = h("table", { class: "audit" },
    h("thead", {}, h("tr", {}, h("th", {}, "Time"), operator ? h("th", {}, "Person") : null, h("th", {}, "Tool"),
      h("th", {}, "Outcome"), h("th", {}, "Summary"))), body);
  const list = h("div", { "aria-live": "polite" });
  const more = h("button", { type: "button", class: "secondary", hidden: true }, "Older entries");
  let next = null;

  const url = (before) => {
    const q = new URLSearchParams({ limit: String(PAGE) });
    for (const el of form.querySelectorAll("select")) if (el.value) q.set(el.name, el.value);
    if (before) q.set("before", String(before));
    return (operator ? "/api/approvals?" : `/api/users/${enc(ctx.uid)}/approvals?`) + q;
  };
  const load = async (append) => {
    try {
      const page = await get(url(append ? next : null));
      if (!append) body.replaceChildren();
      body.append(...page.entries.map((e) => row(e, operator)));
      next = page.next_before;
      more.hidden = next === null;
      mount(list, body.children.length ? table : empty("No approval matches."));
    } catch (err) { mount(list, errorBox(err)); }
  };
  form.addEventListener("change", () => load(false));
  more.addEventListener("click", () => load(true));
  await load(false);
  return h("section", { class: "approvals" },
    h("h2", {}, operator ? "Approvals" : "Your approvals"),
    h("p", { class: "muted" }, operator
      ? "Every step of the tool calls that waited for a person's approval (a mail sent, an event changed): asked, answered, expired or refused, and what came of it. The summary is what the person was shown."
      : "What kith asked your approval for (a mail to send, an event to change), what you answered and what came of it."),
    form, list, h("div", { class: "actions more" }, more));
}
