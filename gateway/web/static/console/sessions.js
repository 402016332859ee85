// Past sessions and their turns, each linking to "what the assistant saw" for that turn.
import { enc, get } from "./api.js";
import { empty, h, when } from "./dom.js";

export async function sessionsView(ctx) {
  const q = h("input", { type: "search", placeholder: "Search sessions", "aria-label": "Search sessions", value: ctx.arg || "" });
  const list = h("div", {});
  const load = async () => {
    const query = q.value.trim();
    const { sessions } = await get(`/api/users/${enc(ctx.uid)}/sessions?limit=50` + (query ? `&q=${enc(query)}` : ""));
    list.replaceChildren(sessions.length ? h("ul", { class: "sessions" }, sessions.map((s) => h("li", {},
      h("a", { href: ctx.link("session", s.session_id) }, s.title || "Session " + String(s.session_id).slice(-8)),
      h("span", { class: "meta" }, ` ${when(s.started_at)} · ${s.channel || ""} · ${s.turns ?? "?"} ${s.turns === 1 ? "turn" : "turns"}`),
      s.open ? h("span", { class: "badge ok" }, "open") : null))) : empty("No sessions found."));
  };
  await load();
  return h("section", {}, h("h2", {}, "Turns: what the assistant saw"),
    h("p", { class: "muted" }, "Pick a session, then a reply, to see the exact context the model received: sections, token counts and what was trimmed."),
    h("form", { class: "search", role: "search", onsubmit: (e) => { e.preventDefault(); load(); } }, q, h("button", { type: "submit" }, "Search")),
    list);
}

export async function sessionView(ctx) {
  const { messages } = await get(`/api/users/${enc(ctx.uid)}/sessions/${enc(ctx.arg)}/messages?limit=200`);
  return h("section", {},
    h("p", { class: "crumbs" }, h("a", { href: ctx.link("sessions") }, "Sessions"), " / ", String(ctx.arg).slice(-8)),
    h("h2", {}, "Session " + String(ctx.arg).slice(-8)),
    messages.length ? h("ol", { class: "transcript" }, messages.map((m) => h("li", { class: "msg-row " + m.role },
      h("div", { class: "meta" }, m.role === "user" ? (m.speaker || "you") : "assistant", " · ", when(m.at)),
      h("div", { class: "msg-text" }, m.text),
      m.role !== "user" && m.turn_id ? h("a", { class: "saw", href: ctx.link("turn", m.turn_id) }, "What the assistant saw") : null)))
      : empty("This session has no messages."));
}
