// Who is talking: name, persona, linked accounts; and linking another app through the /link commands.
import { renderMarkdown } from "./render.js";
import { el } from "./panels.js";

// The prompt quotes the exact command to send: "reply `/link confirm TOKEN` here".
const CONFIRM = /`\/link confirm ([^`\s]+)`/;
const CODE = /Your link code is (\S+?)\./;

// The local owner's marker account (docs/web.md#one-owner): every browser and terminal of this computer.
const OWNER = "local:owner";

function account(a) {
  if (`${a.channel}:${a.account_id}` === OWNER) {
    return el("li", { class: "owner" }, el("span", { class: "channel", text: "this computer" }),
      el("span", { class: "hint", text: "every browser and terminal here (the owner)" }));
  }
  return el("li", {}, el("span", { class: "channel", text: a.channel }), el("span", { class: "mono", text: a.account_id }));
}

export class PersonPanel {
  constructor({ name, persona, user, accounts, linkNew, linkForm, linkCode, out, actions, confirm, cancel, sendCommand }) {
    Object.assign(this, { name, persona, user, accounts, out, actions });
    this.sendCommand = sendCommand;
    this.confirmToken = "";
    this.waiting = new Set(); // ids of the /link messages sent from this panel
    linkNew.addEventListener("click", () => this.command("/link"));
    linkForm.addEventListener("submit", (e) => {
      e.preventDefault();
      const code = linkCode.value.trim();
      if (!code) { linkCode.focus(); return; }
      if (this.command(`/link ${code}`)) linkCode.value = "";
    });
    confirm.addEventListener("click", () => this.command(`/link confirm ${this.confirmToken}`));
    cancel.addEventListener("click", () => this.command("/link cancel"));
  }

  show(person) {
    this.name.textContent = person.display_name || "(no name yet)";
    this.persona.textContent = person.persona || "default";
    this.user.textContent = person.user_id || "—";
    const accounts = person.accounts || [];
    this.accounts.replaceChildren(...(accounts.length ? accounts.map(account)
      : [el("li", { class: "hint", text: "Only this browser so far." })]));
  }

  command(text) {
    const id = this.sendCommand(text);
    if (!id) {
      this.showOut("Not connected; try again in a moment.");
      return false;
    }
    this.waiting.add(id);
    this.showOut("…");
    return true;
  }

  // A reply to one of our /link messages: shown here, with a confirm button when it asks for one.
  // Link notices from the other account (proactive frames) come here too while the panel is open.
  answer(id, text) {
    if (!this.waiting.delete(id)) return false;
    this.showOut(text);
    return true;
  }

  showOut(text) {
    this.out.hidden = false;
    renderMarkdown(this.out, text);
    const code = CODE.exec(text);
    if (code) this.out.prepend(el("p", { class: "big-code", text: code[1] }));
    const match = CONFIRM.exec(text);
    this.confirmToken = match ? match[1] : "";
    this.actions.hidden = !this.confirmToken;
  }
}
