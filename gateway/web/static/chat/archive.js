// What a person can do with a past conversation opened from History (docs/web.md#past-conversations):
// continue it, rename it, export it as Markdown, delete it. Each is one API call (docs/api.md).
import { api, ApiError, token, currentMe, userPath } from "./api.js";

export class ArchiveActions {
  // `sessions`: the History panel (its open conversation, and its list to refresh);
  // `onContinued`: the chat shows the continued conversation; `onDeleted(session, answer)`.
  constructor({ sessions, title, state, status, continueBtn, renameBtn, exportBtn, deleteBtn, renameForm,
    renameInput, renameCancel, confirm, onContinued, onDeleted }) {
    Object.assign(this, { sessions, title, state, status, continueBtn, renameBtn, exportBtn, deleteBtn, renameForm,
      renameInput, confirm, onContinued, onDeleted });
    continueBtn.addEventListener("click", () => this.resume());
    renameBtn.addEventListener("click", () => this.startRename());
    renameCancel.addEventListener("click", () => this.stopRename());
    renameForm.addEventListener("submit", (e) => { e.preventDefault(); this.rename(); });
    renameInput.addEventListener("keydown", (e) => { if (e.key === "Escape") { e.stopPropagation(); this.stopRename(); } });
    exportBtn.addEventListener("click", () => this.export());
    deleteBtn.addEventListener("click", () => confirm.showModal());
    confirm.addEventListener("close", () => { if (confirm.returnValue === "delete") this.remove(); });
  }

  get session() { return this.sessions.currentSession; }
  path(suffix = "") { return userPath(`/sessions/${encodeURIComponent(this.session.session_id)}${suffix}`); }

  // Called when a conversation opens: its title, and whether it is the one the chat continues now.
  show(session) {
    this.stopRename();
    this.say("");
    this.title.textContent = session.title || "Conversation";
    this.title.title = `${session.title || ""} · ${session.started_at ? new Date(session.started_at).toLocaleString() : ""}`;
    this.state.textContent = session.open ? "current conversation" : "read-only";
    this.continueBtn.hidden = !!session.open;
  }

  say(text, error = false) {
    this.status.textContent = text;
    this.status.classList.toggle("error", error);
  }

  async act(what, call) {
    if (!this.session) return null;
    try {
      return await call();
    } catch (err) {
      this.say(`Could not ${what}: ${err.message}`, true);
      return null;
    }
  }

  async resume() {
    const session = this.session;
    const answer = await this.act("continue this conversation", () => api("POST", this.path("/continue"), {}));
    if (!answer) return;
    this.sessions.stale(); // "current" moved: the list is drawn again when History opens
    this.onContinued({ ...session, ...answer });
  }

  startRename() {
    this.renameForm.hidden = false;
    this.renameInput.value = this.session?.renamed ? this.session.title : (this.session?.title || "");
    this.renameInput.focus();
    this.renameInput.select();
  }

  stopRename() { this.renameForm.hidden = true; }

  async rename() {
    const title = this.renameInput.value.trim();
    const answer = await this.act("rename it", () => api("PATCH", this.path(), { title }));
    if (!answer) return;
    Object.assign(this.session, answer);
    this.sessions.stale();
    this.show(this.session);
    this.say(answer.renamed ? "Renamed." : "The title is its first message again.");
    this.renameBtn.focus();
  }

  // The file comes through fetch (the cookie or the operator's token), then is handed to the browser
  // as a download; nothing of it is rendered in the page.
  async export() {
    const session = this.session;
    const blob = await this.act("export it", async () => {
      const headers = {};
      if (token() && !currentMe()) headers.Authorization = "Bearer " + token();
      const response = await fetch(this.path("/export"), { headers, credentials: "same-origin" });
      if (!response.ok) throw new ApiError(response.status, "", response.statusText);
      return response.blob();
    });
    if (!blob) return;
    const day = (session.started_at || "").slice(0, 10);
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = `kith-${day}-${session.session_id.slice(0, 8)}.md`;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
    this.say("Exported as a Markdown file.");
  }

  async remove() {
    const session = this.session;
    const answer = await this.act("delete it", () => api("DELETE", this.path(), {}));
    if (!answer) return;
    this.sessions.stale();
    this.onDeleted(session, answer);
  }
}
