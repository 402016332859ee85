// The reply being worked on: "Thinking…" from sending to the first token, "Using a tool…" while a tool
// runs, and the Stop button, which cancels the model call (a `cancel` frame, docs/protocol.md#stopping-a-reply).
// The server answers a connection's messages one at a time, in order: the first one waiting is the one
// being answered.

export class Working {
  constructor({ log, stop, sendCancel }) {
    this.log = log;
    this.stop = stop;
    this.sendCancel = sendCancel;
    this.queue = []; // ids of the messages sent and not answered yet, oldest first
    this.el = document.createElement("div");
    this.el.className = "msg working"; // not "bot": it is no reply
    this.el.setAttribute("role", "status");
    this.label = document.createElement("span");
    const dots = document.createElement("span");
    dots.className = "dots";
    dots.setAttribute("aria-hidden", "true");
    dots.append(document.createElement("i"), document.createElement("i"), document.createElement("i"));
    this.el.append(this.label, dots);
    stop.addEventListener("click", () => this.cancel());
  }

  get active() { return this.queue.length ? this.queue[0] : null; }

  // A message went out: the page shows it is working at once, before the server says anything.
  add(id) {
    this.queue.push(id);
    if (this.queue.length === 1) this.show("Thinking");
    this.setBusy(true);
  }

  // A `status` frame: thinking, or a tool being used.
  status(f) {
    if (f.id !== this.active) return;
    if (f.state === "tool") this.show(f.tool ? `Using a tool (${f.tool})` : "Using a tool");
    else this.show("Thinking");
  }

  // Text arrives: the reply itself shows now.
  token(id) {
    if (id === this.active) this.el.remove();
  }

  // Answered, refused or stopped: the next message waiting (if any) is being worked on.
  done(id) {
    const at = this.queue.indexOf(id);
    if (at < 0) return;
    this.queue.splice(at, 1);
    this.el.remove();
    this.stop.disabled = false;
    if (this.queue.length) this.show("Thinking");
    else this.setBusy(false);
  }

  clear() {
    this.queue = [];
    this.el.remove();
    this.setBusy(false);
    this.stop.disabled = false;
  }

  // Stop shows while a reply is on its way (a phone makes room for it: chat.css, body.working).
  setBusy(on) {
    this.stop.hidden = !on;
    document.body.classList.toggle("working", on);
  }

  cancel() {
    const id = this.active;
    if (id === null) return;
    if (this.sendCancel(id)) {
      this.stop.disabled = true; // until this reply ends; the next message can be stopped again
      this.label.textContent = "Stopping";
    }
  }

  show(text) {
    this.label.textContent = text;
    this.el.setAttribute("aria-label", `${text}…`);
    this.log.root.appendChild(this.el); // always last: below a reply streaming before a tool call
    this.log.scrollToEnd();
  }
}
