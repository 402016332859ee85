// Lines the poisoning guard held back, and the USER.md curation runs with their rollback.
import { ApiError, enc, get, post } from "./api.js";
import { empty, errorBox, h, mount, toast, when } from "./dom.js";

const listOf = (data, ...keys) => {
  if (Array.isArray(data)) return data;
  for (const k of keys) if (data && Array.isArray(data[k])) return data[k];
  return [];
};

function quarantineSection(items) {
  return h("section", { class: "group", "aria-labelledby": "q-title" },
    h("h3", { id: "q-title" }, "Quarantined lines", h("span", { class: "count" }, String(items.length))),
    h("p", { class: "muted" }, "Text that read like an instruction to the assistant. It never entered a file the assistant reads."),
    items.length ? h("ul", { class: "quarantine" }, items.map((q) => h("li", {},
      h("blockquote", {}, q.text),
      h("p", { class: "meta" },
        h("span", { class: "badge bad" }, q.rule || "flagged"), " ", q.reason || "",
        q.speaker ? ` · said by ${q.speaker}` : "", q.channel ? ` on ${q.channel}` : "",
        q.ts ? " · " + when(q.ts) : "")))) : empty("Nothing quarantined."));
}

function opLine(op) {
  const o = op.op || {};
  const what = o.op || o.type || "op";
  const text = o.text || o.new || o.old || o.section || "";
  const cls = op.outcome === "applied" ? "ok" : op.outcome === "rejected" ? "bad" : "";
  return h("li", {}, h("span", { class: "badge " + cls }, op.outcome || ""), " ", what, o.section ? ` in ${o.section}` : "",
    text && text !== o.section ? h("span", { class: "optext" }, ": \u201c", String(text), "\u201d") : null,
    op.reason ? h("span", { class: "meta" }, " (" + op.reason + ")") : null);
}

function curationSection(ctx, runs, reload) {
  return h("section", { class: "group", "aria-labelledby": "c-title" },
    h("h3", { id: "c-title" }, "Profile curation audit", h("span", { class: "count" }, String(runs.length))),
    h("p", { class: "muted" }, "Each night the model proposes changes to USER.md; code applies them under rails. Any run that changed the file can be undone."),
    runs.length ? h("ol", { class: "runs" }, runs.map((run) => {
      const msg = h("div", { class: "row-status", role: "status" });
      const ops = run.ops || [];
      const undo = async (force) => {
        try {
          const res = await post(`/api/users/${enc(ctx.uid)}/curation/${enc(run.run_id)}/rollback`, force ? { force: true } : {});
          const status = (res && res.status) || "restored";
          mount(msg, h("p", { class: status === "restored" ? "ok" : "muted" }, "Rollback: " + status + (res && res.detail ? " · " + res.detail : "")));
          toast("Rollback: " + status, "ok");
          if (status === "restored") setTimeout(reload, 600);
        } catch (err) {
          if (err instanceof ApiError && err.status === 409 && err.code !== "no_backup") {
            mount(msg, h("p", { class: "error", role: "alert" }, "USER.md changed after this run; undoing it would lose those changes."),
              h("button", { type: "button", class: "danger small", onclick: () => undo(true) }, "Undo anyway"));
          } else mount(msg, errorBox(err));
        }
      };
      const rolledBack = run.rolled_back || run.rollback;
      return h("li", { class: "run" },
        h("div", { class: "run-head" },
          h("strong", {}, when(run.ts)), " ", h("span", { class: "meta" }, run.file || "USER.md"), " ",
          h("span", { class: "badge " + (run.written ? "ok" : "") }, run.written ? "changed the file" : "no change"),
          rolledBack ? h("span", { class: "badge warn" }, "rolled back") : null,
          h("span", { class: "meta" }, ` · ${run.applied ?? 0} applied, ${run.rejected ?? 0} rejected`)),
        ops.length ? h("ul", { class: "ops" }, ops.map(opLine)) : null,
        run.written && !rolledBack ? h("button", { type: "button", class: "secondary small", onclick: () => undo(false),
          "aria-label": "Roll back the run of " + when(run.ts) }, "Roll back") : null,
        msg);
    })) : empty("No curation runs yet."));
}

export async function reviewView(ctx) {
  const root = h("section", { class: "review" });
  const load = async () => {
    // Quarantined lines are the operator's to review (they may quote other people's messages).
    const [q, c] = await Promise.allSettled([
      ctx.me.operator ? get(`/api/users/${enc(ctx.uid)}/quarantine`) : Promise.resolve(null),
      get(`/api/users/${enc(ctx.uid)}/curation`)]);
    mount(root, h("h2", {}, ctx.me.operator ? "Quarantine & audit" : "Audit"),
      q.status === "rejected" ? errorBox(q.reason)
        : q.value ? quarantineSection(listOf(q.value, "quarantine", "lines", "items")) : null,
      c.status === "fulfilled" ? curationSection(ctx, listOf(c.value, "runs", "curation", "items").slice().sort((a, b) => String(b.ts || "").localeCompare(String(a.ts || ""))), load) : errorBox(c.reason));
  };
  await load();
  return root;
}
