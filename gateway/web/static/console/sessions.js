// Past sessions and their turns, each linking to "what the assistant saw" for that turn. A search shows
// the matching messages themselves (seed 000: excerpts grouped by date, the words highlighted).
import { enc, get } from "./api.js";
import { empty, errorBox, h, when } from "./dom.js";

// The excerpt's text with its [start, end) highlight ranges as <mark>: text nodes only, never markup
// (the text is what someone typed).
function marked(text, ranges) {
  const out = [];
  let at = 0;
  for (const [start, end] of [...(ranges || [])].sort((a, b) => a[0] - b[0])) {
    if (start < at || end <= start) continue;
    out.push(text.slice(at, start), h("mark", {}, text.slice(start, end)));
    at = end;
  }
  out.push(text.slice(at));
  return out;
}

function excerpts(ctx, days) {
  return h("div", { class: "found" }, days.map((day) => h("section", { class: "day" },
    h("h3", {}, day.date, h("span", { class: "count" }, `${day.excerpts.length}`)),
    h("ol", { class: "excerpts" }, day.excerpts.map((x) => h("li", { class: "excerpt " + x.role },
      h("div", { class: "meta" }, x.time, " · ", x.role === "user" ? "you" : "assistant",
        x.persona ? ` · ${x.persona}` : "", " · ",
        h("a", { href: ctx.link("session", x.session_id) }, "session " + String(x.session_id).slice(-8)),
        x.role !== "user" && x.turn_id ? [" · ", h("a", { class: "saw", href: ctx.link("turn", x.turn_id) }, "What the assistant saw")] : null),
      h("p", { class: "excerpt-text" }, marked(x.text, x.highlights))))))));
}

export async function sessionsView(ctx) {
  const q = h("input", { type: "search", placeholder: "Search what was said", "aria-label": "Search sessions", value: ctx.arg || "" });
  const list = h("div", { "aria-live": "polite" });
  const load = async () => {
    const query = q.value.trim();
    history.replaceState(null, "", ctx.link("sessions", query));
    if (query) {
      try {
        const found = await get(`/api/users/${enc(ctx.uid)}/sessions/search?q=${enc(query)}&limit=20`);
        const n = found.days.reduce((sum, d) => sum + d.excerpts.length, 0);
        list.replaceChildren(n ? h("div", {}, h("p", { class: "muted" }, `${n} ${n === 1 ? "message" : "messages"} with “${query}”, newest day first.`),
          excerpts(ctx, found.days)) : empty("No message holds all of those words."));
      } catch (err) { list.replaceChildren(errorBox(err)); }
      return;
    }
    const { sessions } = await get(`/api/users/${enc(ctx.uid)}/sessions?limit=50`);
    list.replaceChildren(sessions.length ? h("ul", { class: "sessions" }, sessions.map((s) => h("li", {},
      h("a", { href: ctx.link("session", s.session_id) }, s.title || "Session " + String(s.session_id).slice(-8)),
      h("span", { class: "meta" }, ` ${when(s.started_at)} · ${s.channel || ""} · ${s.turns ?? "?"} ${s.turns === 1 ? "turn" : "turns"}`),
      s.open ? h("span", { class: "badge ok" }, "open") : null))) : empty("No sessions found."));
  };
  await load();
  return h("section", {}, h("h2", {}, "Turns: what the assistant saw"),
    h("p", { class: "muted" }, "Pick a session, then a reply, to see the exact context the model received: sections, token counts and what was trimmed. Search finds the messages that hold every word."),
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
