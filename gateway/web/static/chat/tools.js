// What can be done with a message: click (or tap) it, then Copy (its text as written: the Markdown of a
// reply), Regenerate (the last reply) or Edit (the last message, resent from the box). One small
// toolbar, shown under the message chosen. Regenerate and Edit redo the last exchange
// (docs/protocol.md#regenerate-and-edit): the model answers without it, and it stays in the history.
import { copyText } from "./render.js";
import { sourceOf } from "./log.js";

function button(text) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "ghost";
  b.textContent = text;
  return b;
}

export class MessageTools {
  constructor({ root, canRedo, onRegenerate, onEdit }) {
    this.root = root;
    this.canRedo = canRedo;
    this.target = null;
    this.bar = document.createElement("div");
    this.bar.className = "msg-tools";
    this.bar.setAttribute("role", "toolbar");
    this.bar.setAttribute("aria-label", "Message");
    this.copy = button("Copy");
    this.regenerate = button("Regenerate");
    this.edit = button("Edit");
    this.bar.append(this.copy, this.regenerate, this.edit);
    this.copy.addEventListener("click", () => this.copyTarget());
    this.regenerate.addEventListener("click", () => {
      const last = this.lastExchange();
      this.hide();
      if (last) onRegenerate(last.turn, sourceOf(last.mine), last.reply);
    });
    this.edit.addEventListener("click", () => {
      const last = this.lastExchange();
      this.hide();
      if (last) onEdit(last.turn, sourceOf(last.mine));
    });
    root.addEventListener("click", (event) => {
      if (event.target.closest("a, button, .msg-tools")) return;
      if (String(window.getSelection?.() || "")) return; // selecting text, not choosing the message
      const bubble = event.target.closest(".msg.me, .msg.bot");
      if (bubble && !bubble.classList.contains("streaming")) this.show(bubble);
      else this.hide();
    });
    document.addEventListener("keydown", (e) => { if (e.key === "Escape") this.hide(); });
  }

  // The last reply and the message it answered, when both are shown and known by their turn.
  lastExchange() {
    const replies = this.root.querySelectorAll(".msg.bot[data-turn]:not(.streaming)");
    const reply = replies[replies.length - 1];
    if (!reply || reply !== [...this.root.querySelectorAll(".msg.bot, .msg.me")].pop()) return null;
    const turn = reply.dataset.turn;
    const mine = [...this.root.querySelectorAll(".msg.me")].find((b) => b.dataset.turn === turn);
    return mine ? { turn, mine, reply } : null;
  }

  show(bubble) {
    this.target = bubble;
    this.copy.textContent = "Copy";
    const last = this.canRedo() ? this.lastExchange() : null;
    this.regenerate.hidden = !last || bubble !== last.reply;
    this.edit.hidden = !last || bubble !== last.mine;
    this.bar.classList.toggle("mine", bubble.classList.contains("me"));
    bubble.after(this.bar);
    this.copy.focus({ preventScroll: true });
  }

  hide() {
    this.target = null;
    this.bar.remove();
  }

  async copyTarget() {
    if (!this.target) return;
    const ok = await copyText(sourceOf(this.target));
    this.copy.textContent = ok ? "Copied" : "Copy failed";
  }
}
