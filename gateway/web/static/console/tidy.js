// Memory tidy-up: the weekly hygiene proposals (duplicate people files, conflicts, stale lines,
// notes to promote). Nothing changes until the person accepts one; each shows exactly what it writes.
import { ApiError, enc, get, post } from "./api.js";
import { empty, errorBox, h, mount, toast, when } from "./dom.js";

const KIND = { merge: "Duplicate people", conflict: "Conflict", stale: "Out of date", promote: "Promote notes", playbook: "Playbook" };
const ACTION = { edit: "changes", new: "new file", delete: "deleted" };

function changeList(p) {
  return h("ul", { class: "ops changes" }, (p.changes || []).map((c) => h("li", {},
    h("span", { class: "badge " + (c.action === "delete" ? "bad" : c.action === "new" ? "ok" : "") }, ACTION[c.action] || c.action),
    " ", h("code", {}, c.path),
    c.after !== null && c.after !== undefined
      ? h("details", { class: "newer" }, h("summary", {}, "New text"), h("pre", { class: "plain" }, c.after))
      : null)));
}

function pendingItem(ctx, p, reload) {
  const status = h("div", { class: "row-status", role: "status" });
  const decide = async (verb, button) => {
    button.disabled = true;
    try {
      const res = await post(`/api/users/${enc(ctx.uid)}/hygiene/${enc(p.id)}/${verb}`);
      toast(res.message || (verb === "accept" ? "Applied" : "Dropped"), "ok");
      reload();
    } catch (err) {
      button.disabled = false;
      mount(status, err instanceof ApiError && err.status === 409
        ? h("p", { class: "error", role: "alert" }, "A file changed since this was proposed, so nothing was applied. The next weekly check looks again.")
        : errorBox(err));
      if (err instanceof ApiError && err.status === 409) setTimeout(reload, 1500);
    }
  };
  const accept = h("button", { type: "button", class: "small", "aria-label": `Accept: ${p.title}` }, "Accept");
  const reject = h("button", { type: "button", class: "secondary small", "aria-label": `Reject: ${p.title}` }, "Reject");
  accept.addEventListener("click", () => decide("accept", accept));
  reject.addEventListener("click", () => decide("reject", reject));
  return h("li", { class: "card proposal" },
    h("div", { class: "run-head" }, h("strong", {}, `${p.number}. `), h("span", { class: "badge warn" }, KIND[p.kind] || p.kind), " ",
      h("span", {}, p.title), h("span", { class: "meta" }, " · proposed " + when(p.created))),
    p.detail ? h("p", { class: "detail" }, p.detail) : null,
    changeList(p),
    h("div", { class: "actions" }, accept, reject),
    status);
}

function decidedItem(p) {
  const cls = p.status === "accepted" ? "ok" : p.status === "failed" ? "bad" : "";
  return h("li", { class: "card" },
    h("span", { class: "badge " + cls }, p.status), " ", h("span", {}, p.title),
    h("span", { class: "meta" }, (p.decided ? " · " + when(p.decided) : "") + (p.reason ? " · " + p.reason : "")));
}

export async function tidyView(ctx) {
  const root = h("section", { class: "tidy" });
  const load = async () => {
    let data;
    try { data = await get(`/api/users/${enc(ctx.uid)}/hygiene`); } catch (err) {
      if (err instanceof ApiError && err.status === 404) throw err;
      mount(root, h("h2", {}, "Tidy up"), errorBox(err)); return;
    }
    const items = data.proposals || [];
    const pending = items.filter((p) => p.status === "pending");
    const decided = items.filter((p) => p.status !== "pending");
    const check = h("button", { type: "button", class: "secondary small" }, "Check now");
    check.addEventListener("click", async () => {
      check.disabled = true;
      try {
        const res = await post(`/api/users/${enc(ctx.uid)}/hygiene/run`);
        toast(`${res.added} new proposal(s)`, "ok");
        await load();
      } catch (err) { check.disabled = false; toast(err.message || String(err), "error"); }
    });
    mount(root, h("h2", {}, "Tidy up"),
      h("p", { class: "muted" }, "Each week the assistant looks for duplicate people notes, lines that contradict each other, beliefs that are probably out of date and scratch notes worth a file of their own. Nothing changes until you accept; ",
        h("code", {}, "/tidy"), " in chat does the same."),
      h("div", { class: "actions" }, check),
      h("section", { class: "group", "aria-labelledby": "p-title" },
        h("h3", { id: "p-title" }, "Waiting for you", h("span", { class: "count" }, String(pending.length))),
        pending.length ? h("ol", { class: "runs proposals" }, pending.map((p) => pendingItem(ctx, p, load))) : empty("Nothing to tidy.")),
      decided.length ? h("section", { class: "group", "aria-labelledby": "d-title" },
        h("h3", { id: "d-title" }, "Recently decided", h("span", { class: "count" }, String(decided.length))),
        h("ul", { class: "quarantine" }, decided.map(decidedItem))) : null);
  };
  await load();
  return root;
}
