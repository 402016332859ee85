// Pairing requests waiting for the operator: approve or deny each code.
import { enc, get, post } from "./api.js";
import { empty, errorBox, h, mount, toast, when } from "./dom.js";

export async function pairingView(ctx) {
  const root = h("section", { class: "pairing" });
  const load = async () => {
    const data = await get("/api/pairing");
    const requests = Array.isArray(data) ? data : data.requests || data.pending || [];
    mount(root, h("h2", {}, "Pairing requests"),
      h("p", { class: "muted" }, "People who messaged kith on a channel where pairing is required. Approve only codes you expect."),
      requests.length ? h("ul", { class: "pairs" }, requests.map((r) => {
        const msg = h("div", { class: "row-status", role: "status" });
        const act = async (verb) => {
          try { await post(`/api/pairing/${enc(r.code)}/${verb}`, {}); toast(`${verb === "approve" ? "Approved" : "Denied"} ${r.code}`, "ok"); await load(); }
          catch (err) { mount(msg, errorBox(err)); }
        };
        return h("li", { class: "card", dataset: { code: r.code } },
          h("div", {}, h("code", { class: "code" }, r.code), " ",
            h("strong", {}, r.display_name || r.account_id || ""), h("span", { class: "meta" }, ` ${r.channel || ""}${r.account_id ? ":" + r.account_id : ""}`),
            r.created_at ? h("span", { class: "meta" }, " · " + when(r.created_at)) : null),
          h("div", { class: "actions" },
            h("button", { type: "button", onclick: () => act("approve"), "aria-label": "Approve " + r.code }, "Approve"),
            h("button", { type: "button", class: "secondary", onclick: () => act("deny"), "aria-label": "Deny " + r.code }, "Deny")),
          msg);
      })) : empty("No pairing requests waiting."));
  };
  if (!ctx.me.operator) return h("section", {}, h("h2", {}, "Pairing requests"), errorBox(new Error("Only the operator can approve pairing requests.")));
  await load();
  return root;
}
