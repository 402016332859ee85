// Copy a message: click (or tap) a message, then Copy; its text goes to the clipboard as written (the
// Markdown of a reply, not the rendered text). One small toolbar, shown under the message chosen.
import { copyText } from "./render.js";
import { sourceOf } from "./log.js";

export class MessageTools {
  constructor({ root }) {
    this.root = root;
    this.target = null;
    this.bar = document.createElement("div");
    this.bar.className = "msg-tools";
    this.bar.setAttribute("role", "toolbar");
    this.bar.setAttribute("aria-label", "Message");
    this.copy = document.createElement("button");
    this.copy.type = "button";
    this.copy.className = "ghost";
    this.copy.textContent = "Copy";
    this.bar.append(this.copy);
    this.copy.addEventListener("click", () => this.copyTarget());
    root.addEventListener("click", (event) => {
      if (event.target.closest("a, button, .msg-tools")) return;
      if (String(window.getSelection?.() || "")) return; // selecting text, not choosing the message
      const bubble = event.target.closest(".msg.me, .msg.bot");
      if (bubble && !bubble.classList.contains("streaming")) this.show(bubble);
      else this.hide();
    });
    document.addEventListener("keydown", (e) => { if (e.key === "Escape") this.hide(); });
  }

  show(bubble) {
    this.target = bubble;
    this.copy.textContent = "Copy";
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
