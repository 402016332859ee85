// The model set-up (docs/web.md#setting-up-the-model): offered to the operator while no model is
// configured. Provider, URL and key, "Test connection" (which also lists the server's models), the
// model, then "Save and start": the daemon keeps the key encrypted in its data directory and the next
// message is answered by the new model, without a restart (POST /api/setup/model, docs/api.md).
import { api, currentMe, refreshMe } from "./api.js";

const KEY_HINT = {
  anthropic: "sk-ant-…",
  openai: "sk-…",
  compatible: "only if the server asks for one",
};

export class Wizard {
  constructor({ dialog, form, urlRow, url, key, test, status, model, models, later, offer, openBtn, onReady }) {
    Object.assign(this, { dialog, form, urlRow, url, key, test, status, model, models, offer, onReady });
    this.offered = false;
    url.placeholder = "http://127.0.0.1:11434/v1"; // Ollama's (here, not in the page: it loads nothing from a URL)
    for (const radio of form.querySelectorAll("input[name=w-provider]")) {
      radio.addEventListener("change", () => this.providerChanged());
    }
    test.addEventListener("click", () => this.tryIt());
    later.addEventListener("click", () => dialog.close());
    openBtn.addEventListener("click", () => this.open());
    form.addEventListener("submit", (e) => { e.preventDefault(); this.save(); });
    this.providerChanged();
  }

  get provider() { return this.form.querySelector("input[name=w-provider]:checked").value; }

  providerChanged() {
    this.urlRow.hidden = this.provider !== "compatible";
    this.key.placeholder = KEY_HINT[this.provider];
    this.models.replaceChildren();
    this.say("");
  }

  settings() {
    return { provider: this.provider, base_url: this.url.value.trim(), api_key: this.key.value.trim(),
      model: this.model.value.trim() };
  }

  say(text, kind = "") {
    this.status.textContent = text;
    this.status.className = "w-status hint" + (kind ? " " + kind : "");
  }

  // Called with each `ready` frame: the operator is offered the set-up (once opened by itself per
  // page load); anyone else sees the daemon's notice, which says whom to ask.
  async modelState(ready) {
    if (ready) { this.offer.hidden = true; return false; }
    const me = currentMe() || await refreshMe();
    if (!me?.operator) return false;
    this.offer.hidden = false;
    if (!this.offered) { this.offered = true; this.open(); }
    return true;
  }

  open() {
    if (!this.dialog.open) this.dialog.showModal();
    (this.provider === "compatible" ? this.url : this.key).focus();
  }

  async tryIt() {
    this.say("Testing…");
    try {
      const result = await api("POST", "/api/setup/model/test", this.settings());
      this.say(result.message, result.ok ? "ok" : "bad");
      if (result.ok) this.fillModels(result.models || []);
      return result.ok;
    } catch (err) {
      this.say(err.message, "bad");
      return false;
    }
  }

  fillModels(models) {
    this.models.replaceChildren(...models.map((m) => Object.assign(document.createElement("option"), { value: m })));
    if (!this.model.value && models.length) this.model.value = models[0];
  }

  async save() {
    if (!this.model.value.trim()) {
      this.say("Choose a model (Test connection lists the server's).", "bad");
      this.model.focus();
      return;
    }
    this.say("Trying the model…");
    try {
      const state = await api("POST", "/api/setup/model", this.settings());
      this.key.value = ""; // the page keeps no copy of the key
      this.offer.hidden = true;
      this.dialog.close();
      this.onReady(state);
    } catch (err) {
      this.say(err.message, "bad");
    }
  }
}
