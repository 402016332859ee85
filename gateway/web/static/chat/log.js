// A list of message bubbles: the live conversation or a past session shown read-only.
import { fileStrip, splitFiles } from "./media.js";
import { renderMarkdown } from "./render.js";

// Streaming bubbles -> the text to render at the next animation frame.
const STREAMING = new WeakMap();
// Every bubble -> the text it shows, as written (Markdown source for replies): what Copy copies.
const SOURCE = new WeakMap();

export function sourceOf(el) { return SOURCE.get(el) ?? el.textContent; }
const ROLE_CLASS = { user: "me", assistant: "bot", notice: "notice", system: "notice", error: "error" };
// How a stopped reply ends in the history (gateway/turn/stop.py): shown as stopped after a reload too.
const STOPPED = ["*[stopped]*", "*[stopped before answering]*"];

export class MessageLog {
  constructor(root, { onLoadEarlier } = {}) {
    this.root = root;
    this.onLoadEarlier = onLoadEarlier;
    this.oldestSeq = null;
    this.more = false;
    this.moreButton = null;
  }

  nearBottom() {
    const r = this.root;
    return r.scrollHeight - r.scrollTop - r.clientHeight < 80;
  }

  scrollToEnd() { this.root.scrollTop = this.root.scrollHeight; }

  // A bubble; markdown for the assistant and notices, plain text for what the person typed.
  // `files`: what goes with a message being sent, still on this device ({name, file}).
  bubble(role, text, { at, seq, turn, streaming = false, prepend = false, files = [] } = {}) {
    const el = document.createElement("div");
    el.className = "msg " + (ROLE_CLASS[role] || "notice") + (streaming ? " streaming" : "");
    if (seq !== undefined && seq !== null) el.dataset.seq = String(seq);
    if (turn) el.dataset.turn = turn; // the exchange it belongs to: what Regenerate and Edit name
    if (streaming) el.setAttribute("aria-busy", "true"); // read out once finished, not at every frame
    if (at) el.title = new Date(at).toLocaleString();
    if (role === "assistant" && STOPPED.some((mark) => (text || "").endsWith(mark))) el.classList.add("stopped");
    this.fill(el, role, text, files);
    if (prepend) {
      const anchor = this.moreButton ? this.moreButton.nextSibling : this.root.firstChild;
      this.root.insertBefore(el, anchor);
    } else {
      const stick = this.nearBottom();
      this.root.appendChild(el);
      if (stick || role === "user") this.scrollToEnd();
    }
    return el;
  }

  fill(el, role, text, local = []) {
    if (role === "user") {
      // What the person wrote, then the files the message carried (stored links become thumbnails and
      // chips; Copy and Edit take the words only).
      const { text: said, files } = splitFiles(text);
      SOURCE.set(el, said);
      el.textContent = said;
      el.classList.toggle("no-text", !said.trim());
      if (files.length || local.length) el.append(fileStrip([...files, ...local]));
      return;
    }
    SOURCE.set(el, text);
    if (role === "error") {
      el.textContent = text;
    } else {
      el.classList.add("md");
      renderMarkdown(el, text);
    }
  }

  // Re-render a streaming bubble at most once a frame, however fast the deltas come.
  stream(el, text) {
    const scheduled = STREAMING.has(el);
    STREAMING.set(el, text);
    if (scheduled) return;
    requestAnimationFrame(() => {
      const latest = STREAMING.get(el);
      STREAMING.delete(el);
      if (latest === undefined) return; // finished meanwhile: the final text is already shown
      const stick = this.nearBottom();
      renderMarkdown(el, latest);
      if (stick) this.scrollToEnd();
    });
  }

  finish(el, role, text) {
    STREAMING.delete(el);
    el.removeAttribute("aria-busy");
    el.className = "msg " + (ROLE_CLASS[role] || "notice");
    const stick = this.nearBottom();
    this.fill(el, role, text);
    if (stick) this.scrollToEnd();
  }

  clear() {
    this.root.replaceChildren();
    this.oldestSeq = null;
    this.more = false;
    this.moreButton = null;
  }

  // A page of stored messages: `replace` for the newest page, otherwise older ones go on top.
  page(messages, more, { replace }) {
    if (replace) this.clear();
    const ordered = [...messages].sort((a, b) => a.seq - b.seq);
    const before = this.root.scrollHeight;
    if (replace) {
      for (const m of ordered) this.bubble(m.role, m.text, { at: m.at, seq: m.seq, turn: m.turn_id });
    } else {
      for (const m of ordered.reverse()) {
        this.bubble(m.role, m.text, { at: m.at, seq: m.seq, turn: m.turn_id, prepend: true });
      }
    }
    if (ordered.length) {
      const seqs = ordered.map((m) => m.seq);
      const low = Math.min(...seqs);
      this.oldestSeq = this.oldestSeq === null ? low : Math.min(this.oldestSeq, low);
    }
    this.setMore(more);
    if (replace) this.scrollToEnd();
    else this.root.scrollTop += this.root.scrollHeight - before; // keep the reader where they were
  }

  setMore(more) {
    this.more = !!more;
    if (this.more && !this.moreButton) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "load-earlier ghost";
      b.textContent = "Load earlier messages";
      b.addEventListener("click", () => {
        b.disabled = true;
        this.onLoadEarlier?.(this.oldestSeq);
      });
      this.root.prepend(b);
      this.moreButton = b;
    } else if (!this.more && this.moreButton) {
      this.moreButton.remove();
      this.moreButton = null;
    }
    if (this.moreButton) {
      this.moreButton.disabled = false;
      this.root.prepend(this.moreButton);
    }
  }
}
