// The session search's answer (GET .../sessions/search, seed 000): the messages that hold every word, as
// one-line excerpts grouped by the day they were said, the words marked. Same approach as the console's
// Turns view (console/sessions.js), drawn with the chat's own elements.
import { el } from "./panels.js";

// The excerpt's text with its [start, end) highlight ranges as <mark>: text nodes only, never markup
// (the text is what someone typed).
export function marked(text, ranges) {
  const out = [];
  let at = 0;
  for (const [start, end] of [...(ranges || [])].sort((a, b) => a[0] - b[0])) {
    if (start < at || end <= start) continue;
    out.push(document.createTextNode(text.slice(at, start)), el("mark", { text: text.slice(start, end) }));
    at = end;
  }
  out.push(document.createTextNode(text.slice(at)));
  return out;
}

// One section per day, newest first as the server sends them; each excerpt a button that opens its
// conversation (``onOpen(excerpt)``). Answers how many excerpts were drawn.
export function renderExcerpts(list, days, onOpen) {
  let shown = 0;
  for (const day of days || []) {
    const items = el("ul", { class: "excerpts" });
    for (const x of day.excerpts || []) {
      const who = x.role === "user" ? "you" : "assistant";
      const meta = [x.time, who, x.persona].filter(Boolean).join(" · ");
      const item = el("button", { type: "button", class: `excerpt-item ${x.role}`, onclick: () => onOpen(x) },
        el("span", { class: "meta", text: meta }), el("span", { class: "excerpt-text" }, ...marked(x.text || "", x.highlights)));
      item.dataset.session = x.session_id;
      items.append(el("li", {}, item));
      shown += 1;
    }
    const group = el("section", { class: "day" }, el("h3", { text: dateLabel(day.date) }), items);
    group.dataset.day = day.date;
    list.append(group);
  }
  return shown;
}

// "YYYY-MM-DD" (a day in the person's time zone, as the server counts it) as the History list names days.
function dateLabel(date) {
  const [y, m, d] = String(date || "").split("-").map(Number);
  if (!y || !m || !d) return date || "Undated";
  const day = new Date(y, m - 1, d);
  const today = new Date();
  const yesterday = new Date(today.getFullYear(), today.getMonth(), today.getDate() - 1);
  if (day.toDateString() === today.toDateString()) return "Today";
  if (day.toDateString() === yesterday.toDateString()) return "Yesterday";
  return day.toLocaleDateString([], { weekday: "short", year: "numeric", month: "short", day: "numeric" });
}
