// Memory jobs that need the operator: dead-lettered (retry or discard each) or failing again and again.
import { enc, get, post } from "./api.js";
import { empty, errorBox, h, mount, toast, when } from "./dom.js";

export async function attentionView(ctx) {
  const root = h("section", { class: "attention" });
  const load = async () => {
    const data = await get("/api/memory/attention");
    const dead = data.dead || [];
    mount(root, h("h2", {}, "Needs attention"),
      h("p", { class: "muted" }, "Memory jobs that gave up after their retries (an unusable model answer, a model that was down). Until they run, what they would have written is missing from the person's memory."),
      data.failing ? h("p", { class: "warn", role: "status" }, `${data.failing} memory job(s) failing repeatedly and still retried; last: ${data.last_failing}`) : null,
      dead.length ? h("ul", { class: "pairs attention-list" }, dead.map((d) => {
        const msg = h("div", { class: "row-status", role: "status" });
        const act = async (verb) => {
          try {
            const out = await post(`/api/memory/attention/${enc(d.job_id || d.entry_id)}/${verb}`, {});
            toast(`${d.name}: ${out.result}`, "ok");
            await load();
          } catch (err) { mount(msg, errorBox(err)); }
        };
        return h("li", { class: "card", dataset: { job: d.job_id } },
          h("div", {}, h("strong", {}, d.name), h("span", { class: "meta" }, ` ${d.job_id} · ${d.tries} tries`),
            d.at_ms ? h("span", { class: "meta" }, " · " + when(new Date(d.at_ms).toISOString())) : null),
          h("div", { class: "error-line" }, h("code", {}, d.error || "(no error recorded)")),
          h("div", { class: "actions" },
            h("button", { type: "button", onclick: () => act("retry"), "aria-label": "Retry " + d.job_id }, "Retry"),
            h("button", { type: "button", class: "secondary", onclick: () => act("discard"), "aria-label": "Discard " + d.job_id }, "Discard")),
          msg);
      })) : empty("No memory job needs attention."));
  };
  if (!ctx.me.operator) return h("section", {}, h("h2", {}, "Needs attention"), errorBox(new Error("Only the operator can see the memory jobs.")));
  await load();
  return root;
}
