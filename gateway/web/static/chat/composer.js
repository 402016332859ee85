// The message box. The draft is never lost: it is kept in localStorage while typed, refused drafts stay
// in the box, and a message the server refused comes back into it.

export const MAX_CHARS = 32000; // docs/protocol.md: `text` is 1 to 32,000 characters
export const MAX_FRAME_BYTES = 65536; // server.max_frame_bytes default; the whole JSON frame counts
const DRAFT_KEY = "kith.draft";

export class Composer {
  constructor({ form, input, button, error, onSend, attachments = null }) {
    this.attachments = attachments; // files for the next message (attach.js); text may then be empty
    this.form = form;
    this.input = input;
    this.button = button;
    this.error = error;
    this.onSend = onSend;
    this.input.value = localStorage.getItem(DRAFT_KEY) || "";
    this.resize();
    form.addEventListener("submit", (e) => { e.preventDefault(); this.submit(); });
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); this.submit(); }
    });
    input.addEventListener("input", () => {
      this.resize();
      this.save();
      if (!this.error.hidden && this.check(this.input.value) === "") this.showError("");
    });
  }

  resize() {
    this.input.style.height = "";
    this.input.style.height = this.input.scrollHeight + "px";
  }

  save() {
    try { localStorage.setItem(DRAFT_KEY, this.input.value); } catch { /* quota: the box still has it */ }
  }

  // "" when the text may be sent, else why not.
  check(text) {
    const points = [...text].length; // the server counts code points, as Python's len() does
    if (points > MAX_CHARS) {
      return `This message is ${points.toLocaleString()} characters; the limit is ${MAX_CHARS.toLocaleString()}. ` +
        "Shorten it or send it in parts. Your text is still here.";
    }
    const bytes = new TextEncoder().encode(JSON.stringify({ type: "message", id: "x".repeat(40), text })).length;
    if (bytes > MAX_FRAME_BYTES) {
      return `This message is ${bytes.toLocaleString()} bytes once encoded; the limit is ` +
        `${MAX_FRAME_BYTES.toLocaleString()}. Shorten it or send it in parts. Your text is still here.`;
    }
    return "";
  }

  showError(text) {
    this.error.textContent = text;
    this.error.hidden = !text;
    this.input.setAttribute("aria-invalid", text ? "true" : "false");
  }

  submit() {
    const text = this.input.value.trim();
    const files = this.attachments?.count || 0;
    if (!text && !files) return;
    if (files && (this.attachments.busy || this.attachments.failed)) {
      this.showError(this.attachments.busy ? "Still uploading; send again in a moment."
        : "A file could not be uploaded: remove it (✕) or pick it again.");
      return;
    }
    const problem = this.check(text);
    if (problem) { this.showError(problem); this.input.focus(); return; }
    if (!this.onSend(text)) {
      this.showError("Not connected yet; your message is kept here and can be sent once connected.");
      return;
    }
    this.showError("");
    this.attachments?.clear();
    this.input.value = "";
    this.save();
    this.resize();
  }

  // A message the server did not take comes back, in front of anything typed since.
  restore(text, why) {
    const now = this.input.value;
    if (!now.includes(text)) this.input.value = now ? `${text}\n${now}` : text;
    this.save();
    this.resize();
    this.showError(why);
  }
}
