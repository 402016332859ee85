// Settings a person expects: name, timezone, persona, context tier (PATCH .../settings) and the
// Off-The-Record switch (the /otr command over the socket; its state comes back in frames).
import { api, userPath } from "./api.js";
import { el } from "./panels.js";

export class SettingsPanel {
  constructor({ form, name, tz, persona, personas, tier, status, otr, otrLabel, onSaved, sendCommand }) {
    Object.assign(this, { form, name, tz, persona, personas, tier, status, otr, otrLabel });
    this.onSaved = onSaved;
    this.sendCommand = sendCommand;
    this.fillZones();
    form.addEventListener("submit", (e) => { e.preventDefault(); this.save(); });
    otr.addEventListener("change", () => {
      const want = otr.checked;
      otr.checked = !want; // the switch follows the server's answer, not the click
      if (!this.sendCommand(want ? "/otr on" : "/otr off")) this.status.textContent = "Not connected.";
    });
  }

  fillZones() {
    let zones = [];
    try { zones = Intl.supportedValuesOf("timeZone"); } catch { zones = []; }
    if (!zones.includes("UTC")) zones = ["UTC", ...zones];
    this.tz.replaceChildren(...zones.map((z) => el("option", { value: z, text: z.replaceAll("_", " ") })));
  }

  show(person) {
    this.name.value = person.display_name || "";
    const zone = person.timezone || "";
    if (zone && ![...this.tz.options].some((o) => o.value === zone)) this.tz.prepend(el("option", { value: zone, text: zone }));
    this.tz.value = zone || Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
    this.persona.value = person.persona || "";
    const names = person.personas || [];
    this.personas.replaceChildren(...names.map((p) => el("option", { value: p })));
    this.tier.value = person.tier ? String(person.tier) : "";
    const label = this.tier.querySelector('option[value=""]');
    const effective = this.tier.querySelector(`option[value="${person.effective_tier}"]`);
    label.textContent = effective && !person.tier ? `default (now ${effective.textContent})` : "default";
    this.setOtr(!!person.otr);
    this.status.textContent = "";
  }

  setOtr(on) {
    this.otr.checked = on;
    this.otrLabel.textContent = on ? "On: nothing from now on is stored" : "Off: this conversation is remembered";
  }

  async save() {
    const body = {
      display_name: this.name.value.trim() || undefined, // a name cannot be emptied, only changed
      timezone: this.tz.value,
      persona: this.persona.value.trim() || null,
      tier: this.tier.value ? Number(this.tier.value) : null,
    };
    this.status.textContent = "Saving…";
    try {
      const saved = await api("PATCH", userPath("/settings"), body);
      this.status.textContent = "Saved.";
      this.onSaved(saved || body);
    } catch (err) {
      this.status.textContent = `Not saved: ${err.message}`;
    }
  }
}
