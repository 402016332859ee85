// Search what the assistant would recall, narrowed by topic, entity or date (seed 004: the index's
// payload fields, as `kith memory search --topic/--entity/--since`), and forget any hit.
import { enc, get, post } from "./api.js";
import { empty, errorBox, h, mount, toast, when } from "./dom.js";

function describe(report) {
  if (!report) return "Forgotten.";
  if (report.message) return report.message;
  const lines = (report.lines || []).length, facts = (report.facts || []).length;
  return `Forgotten: ${lines} lines, ${facts} facts, ${report.points || 0} index entries.`;
}

export async function recallView(ctx) {
  const root = h("section", { class: "recall" });
  const results = h("div", { class: "hits", "aria-live": "polite" });
  const q = h("input", { type: "search", name: "q", placeholder: "What do you remember about…", "aria-label": "Search memory", required: true });
  const topic = h("input", { type: "text", name: "topic", placeholder: "any", maxlength: 200 });
  const entity = h("input", { type: "text", name: "entity", placeholder: "anyone", maxlength: 200 });
  const since = h("input", { type: "date", name: "since" });
  const field = (label, input) => h("label", { class: "filter" }, h("span", {}, label), input);
  const search = async (ev) => {
    if (ev) ev.preventDefault();
    const query = q.value.trim();
    if (!query) return;
    history.replaceState(null, "", ctx.link("recall", query));
    mount(results, h("p", { class: "muted" }, "Searching…"));
    const narrow = [["topic", topic.value.trim()], ["entity", entity.value.trim()], ["since", since.value]]
      .filter(([, v]) => v).map(([k, v]) => `&${k}=${enc(v)}`).join("");
    try {
      const { hits } = await get(`/api/users/${enc(ctx.uid)}/recall?q=${enc(query)}&k=10${narrow}`);
      mount(results, hits.length ? h("ol", { class: "hit-list" }, hits.map((hit) => {
        const msg = h("div", { class: "row-status", role: "status" });
        const item = h("li", { class: "hit", dataset: { ref: hit.ref } },
          h("div", { class: "hit-head" },
            h("span", { class: "badge" }, hit.kind || "memory"), " ",
            h("span", { class: "meta" }, hit.path || ""), " ", hit.date ? h("span", { class: "meta" }, when(hit.date)) : null, " ",
            h("span", { class: "meta" }, typeof hit.score === "number" ? "score " + hit.score.toFixed(2) : ""),
            hit.topic ? h("span", { class: "badge topic", title: "topic" }, "topic: " + hit.topic) : null,
            (hit.entities || []).map((e) => h("span", { class: "badge entity", title: "entity" }, e))),
          h("blockquote", { class: "hit-text" }, String(hit.text).replace(/<!--[\s\S]*?-->\n?/g, "").trim()),
          h("button", { type: "button", class: "danger small", "aria-label": "Forget this: " + String(hit.text).slice(0, 80),
            onclick: async () => {
              if (!confirm("Forget this everywhere (files, facts and search)? You can still roll a file back from its audit.")) return;
              const forget = async (body) => {
                try {
                  const report = await post(`/api/users/${enc(ctx.uid)}/forget`, body);
                  if (report && report.status === "confirm") {
                    // A broad match: show what would go and let the person confirm it.
                    mount(msg, h("p", { class: "muted" }, describe(report)),
                      h("button", { type: "button", class: "danger small", onclick: () => forget({ ref: "pending:" + report.forget_id }) }, "Yes, forget all of it"));
                    return;
                  }
                  if (report && (report.status === "nothing" || report.status === "refused")) {
                    mount(msg, h("p", { class: "error" }, describe(report))); return;
                  }
                  item.classList.add("forgotten");
                  item.querySelector("button.danger").remove(); // nothing left to forget here
                  mount(msg, h("p", { class: "ok" }, describe(report)));
                  msg.setAttribute("tabindex", "-1"); msg.focus(); // keyboard focus stays where the button was
                  toast("Forgotten", "ok");
                } catch (err) { mount(msg, errorBox(err)); }
              };
              await forget({ ref: hit.ref });
            } }, "Forget this"), msg);
        return item;
      })) : empty(narrow ? "Nothing recalled for that with these filters." : "Nothing recalled for that."));
    } catch (err) { mount(results, errorBox(err)); }
  };
  mount(root, h("h2", {}, "Recall & forget"),
    h("p", { class: "muted" }, "Search exactly as the assistant does before it answers. \"Forget this\" removes the memory from files, facts and the search index."),
    h("form", { class: "search recall-search", onsubmit: search, role: "search" }, q, h("button", { type: "submit" }, "Search"),
      h("fieldset", { class: "filters" }, h("legend", {}, "Only memories"),
        field("of topic", topic), field("naming", entity), field("dated since", since))),
    results);
  if (ctx.arg) { q.value = ctx.arg; await search(); }
  return root;
}
