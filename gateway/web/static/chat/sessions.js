// Past sessions: listed by date, searched by words or meaning (sessions) or for the messages themselves
// (excerpts, chat/excerpts.js), opened read-only (docs/api.md); what can
// be done with an opened one is chat/archive.js.
import { api, userPath } from "./api.js";
import { renderExcerpts } from "./excerpts.js";
import { MessageLog } from "./log.js";
import { el } from "./panels.js";

const PAGE = 30;

export class SessionsPanel {
  constructor({ dialog, form, query, mode, list, status, more, archive, bar, close, onArchive, onShow }) {
    Object.assign(this, { dialog, form, query, mode, list, status, more, archive, bar });
    this.onArchive = onArchive;
    this.onShow = onShow;
    this.oldest = null;
    this.loaded = false;
    this.generation = 0;
    this.currentSession = null;
    this.archiveLog = new MessageLog(archive, { onLoadEarlier: (seq) => this.loadMessages(seq) });
    form.addEventListener("submit", (e) => { e.preventDefault(); this.search(); });
    mode.addEventListener("change", () => { if (query.value.trim()) this.search(); });
    more.addEventListener("click", () => this.load({ append: true }));
    close.addEventListener("click", () => this.closeArchive());
  }

  opened() { if (!this.loaded) this.search(); this.query.focus(); }

  // The list is drawn again at the next opening (a conversation was renamed, continued or deleted). What
  // it showed goes now: a deleted conversation must not reappear while the new list loads, nor an
  // answer already on its way be drawn over it.
  stale() {
    this.loaded = false;
    this.generation++;
    this.oldest = null;
    this.list.replaceChildren();
    this.more.hidden = true;
  }

  search() { this.oldest = null; return this.load({ append: false }); }

  async load({ append }) {
    const q = this.query.value.trim();
    if (q && this.mode.value === "messages") return this.searchMessages(q);
    const params = new URLSearchParams({ limit: String(PAGE) });
    if (q) { params.set("q", q); params.set("mode", this.mode.value); }
    if (append && this.oldest) params.set("before", this.oldest);
    this.status.textContent = q ? "Searching…" : "Loading…";
    const generation = ++this.generation; // a slower, older answer must not overwrite a newer one
    let data;
    try {
      data = await api("GET", userPath(`/sessions?${params}`));
    } catch (err) {
      if (generation === this.generation) this.status.textContent = `Could not load sessions: ${err.message}`;
      return;
    }
    if (generation !== this.generation) return;
    this.loaded = true;
    const sessions = data?.sessions || [];
    if (!append) this.list.replaceChildren();
    this.render(sessions);
    if (sessions.length) this.oldest = sessions[sessions.length - 1].started_at;
    this.more.hidden = q !== "" || sessions.length < PAGE;
    const shown = this.list.querySelectorAll("button.session-item").length;
    this.status.textContent = shown ? (q ? `${shown} matching session${shown === 1 ? "" : "s"}` : "")
      : (q ? "No session matches." : "No past sessions yet.");
    this.answered(q);
  }

  // Which search the list now shows ("mode:words", or "" for the plain list): set only once its answer is
  // drawn, so a test (or anything else) can tell a fresh answer from the list that was there before.
  answered(q) { this.list.dataset.answered = q ? `${this.mode.value}:${q}` : ""; }

  // The session search (GET .../sessions/search): the messages holding every word, by day, words marked;
  // a message opens its conversation read-only.
  async searchMessages(q) {
    this.status.textContent = "Searching…";
    this.more.hidden = true;
    const generation = ++this.generation;
    let data;
    try {
      data = await api("GET", userPath(`/sessions/search?${new URLSearchParams({ q, limit: "20" })}`));
    } catch (err) {
      if (generation === this.generation) this.status.textContent = `Could not search: ${err.message}`;
      return;
    }
    if (generation !== this.generation) return;
    this.loaded = true;
    this.list.replaceChildren();
    const shown = renderExcerpts(this.list, data?.days, (x) => this.openArchive({ session_id: x.session_id, started_at: x.at }));
    this.status.textContent = shown ? `${shown} message${shown === 1 ? "" : "s"} with “${q}”, newest day first`
      : "No message holds all of those words.";
    this.answered(q);
  }

  render(sessions) {
    for (const s of sessions) {
      const day = dayLabel(s.started_at);
      let group = this.list.lastElementChild;
      if (!group || group.dataset.day !== day) {
        group = el("section", { class: "day" }, el("h3", { text: day }), el("ul"));
        group.dataset.day = day;
        this.list.append(group);
      }
      const time = s.started_at ? new Date(s.started_at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) : "";
      const label = s.title || "(untitled)";
      const meta = [time, s.channel, `${s.turns ?? 0} turn${s.turns === 1 ? "" : "s"}`, s.open ? "current" : ""]
        .filter(Boolean).join(" · ");
      const item = el("button", { type: "button", class: "session-item", onclick: () => this.openArchive(s) },
        el("span", { class: "title", text: label }), el("span", { class: "meta", text: meta }));
      item.dataset.session = s.session_id;
      group.querySelector("ul").append(el("li", {}, item));
    }
  }

  async openArchive(session) {
    this.currentSession = { ...session };
    this.onShow?.(this.currentSession);
    this.archiveLog.clear();
    this.dialog.close();
    this.onArchive(true);
    await this.loadMessages(null);
    this.archive.focus();
  }

  async loadMessages(beforeSeq) {
    const session = this.currentSession;
    if (!session) return;
    const params = new URLSearchParams({ limit: "50" });
    if (beforeSeq !== null && beforeSeq !== undefined) params.set("before_seq", String(beforeSeq));
    try {
      const data = await api("GET", userPath(`/sessions/${encodeURIComponent(session.session_id)}/messages?${params}`));
      this.archiveLog.page(data?.messages || [], data?.more, { replace: beforeSeq === null || beforeSeq === undefined });
    } catch (err) {
      this.archiveLog.bubble("error", `Could not load this session: ${err.message}`);
    }
  }

  closeArchive() {
    this.currentSession = null;
    this.archiveLog.clear(); // nothing of it stays in the page (it may have just been deleted)
    this.onArchive(false);
  }
}

function dayLabel(iso) {
  if (!iso) return "Undated";
  const d = new Date(iso);
  const today = new Date();
  const yesterday = new Date(today.getFullYear(), today.getMonth(), today.getDate() - 1);
  if (d.toDateString() === today.toDateString()) return "Today";
  if (d.toDateString() === yesterday.toDateString()) return "Yesterday";
  return d.toLocaleDateString([], { weekday: "short", year: "numeric", month: "short", day: "numeric" });
}
