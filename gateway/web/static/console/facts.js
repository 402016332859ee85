// The knowledge graph as a timeline: each fact with its validity window; superseded facts stay visible.
import { del, enc, get } from "./api.js";
import { empty, errorBox, h, mount, toast, when } from "./dom.js";

function state(f) {
  if (f.superseded_by) return ["superseded", "superseded"];
  const ended = typeof f.current === "boolean" ? !f.current
    : f.valid_to && new Date(String(f.valid_to).replace(" ", "T")) <= new Date();
  return ended ? ["ended", "ended"] : ["current", "current"];
}

export async function factsView(ctx) {
  const root = h("section", { class: "facts" });
  let showOld = true;
  const load = async () => {
    const { facts } = await get(`/api/users/${enc(ctx.uid)}/facts?include_superseded=${showOld ? 1 : 0}`);
    facts.sort((a, b) => String(b.valid_from || "").localeCompare(String(a.valid_from || "")));
    const toggle = h("label", { class: "check" },
      h("input", { type: "checkbox", checked: showOld, onchange: (e) => { showOld = e.target.checked; load(); } }),
      " Show ended and superseded facts");
    const list = facts.length ? h("ol", { class: "timeline" }, facts.map((f) => {
      const [cls, label] = state(f);
      const msg = h("div", { class: "row-status", role: "status" });
      return h("li", { class: "fact " + cls, dataset: { fact: String(f.id) } },
        h("div", { class: "when" },
          h("span", {}, when(f.valid_from) || "always"), h("span", { class: "arrow", "aria-hidden": "true" }, "→"),
          h("span", {}, f.valid_to ? when(f.valid_to) : "now")),
        h("div", { class: "what" },
          h("span", { class: "subj" }, f.subject), " ", h("span", { class: "pred" }, String(f.predicate).replaceAll("_", " ")), " ",
          h("span", { class: "obj" }, f.object),
          " ", h("span", { class: "badge " + cls }, label),
          f.source ? h("span", { class: "meta" }, " · from " + f.source) : null),
        h("button", { type: "button", class: "danger small", "aria-label": `Delete fact: ${f.subject} ${f.predicate} ${f.object}`,
          onclick: async () => {
            if (!confirm(`Delete "${f.subject} ${f.predicate} ${f.object}"? It will no longer reach the assistant.`)) return;
            try { await del(`/api/users/${enc(ctx.uid)}/facts/${enc(f.id)}`); toast("Fact deleted", "ok"); await load(); }
            catch (err) { mount(msg, errorBox(err)); }
          } }, "Delete"), msg);
    })) : empty("No facts yet. They are learned from conversations each night.");
    mount(root, h("h2", {}, "Facts over time"),
      h("p", { class: "muted" }, "What kith believes about you and the people you mention, with when it became and stopped being true."),
      toggle, list);
  };
  await load();
  return root;
}
