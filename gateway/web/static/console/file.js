// One memory file: rendered Markdown, and an editor that never overwrites a newer version (etag).
import { ApiError, enc, encPath, get, put } from "./api.js";
import { bytes, errorBox, h, mount, toast, when } from "./dom.js";
import { expiryBadge } from "./files.js";
import { markdown } from "./render.js";

export async function fileView(ctx) {
  const url = `/api/users/${enc(ctx.uid)}/memory/files/${encPath(ctx.arg)}`;
  let file = await get(url);
  const root = h("section", { class: "file" });

  const show = () => mount(root,
    h("p", { class: "crumbs" }, h("a", { href: ctx.link("files") }, "Files"), " / ", ctx.arg),
    h("div", { class: "title-row" },
      h("h2", {}, ctx.arg.split("/").pop()),
      file.read_only ? h("span", { class: "badge" }, "kept by kith, read only") : h("button", { type: "button", onclick: edit }, "Edit")),
    h("p", { class: "meta" }, bytes(file.size), file.modified ? " · changed " + when(file.modified) : "", " ", expiryBadge(file.expires)),
    h("article", { class: "doc" }, markdown(file.text)));

  // After a conflict the newer text is shown above the person's own draft, which is never thrown away.
  function edit(draft, newer) {
    const area = h("textarea", { class: "editor", "aria-label": "File text", spellcheck: "true" });
    area.value = typeof draft === "string" ? draft : file.text;
    const status = h("div", { class: "status-line", role: "status" });
    const save = async (ev) => {
      ev.preventDefault();
      try {
        const saved = await put(url, { text: area.value, etag: file.etag });
        file = { ...file, ...(saved || {}), text: area.value };
        if (saved && saved.etag) file.etag = saved.etag;
        toast("Saved " + ctx.arg, "ok");
        file = await get(url);
        show();
      } catch (err) {
        if (err instanceof ApiError && err.status === 409) {
          mount(status, h("p", { class: "error", role: "alert" },
            "This file changed since you opened it (kith or another tab wrote it), so nothing was saved. Load the new version to compare; your text stays in the editor."),
            h("button", { type: "button", onclick: async () => {
              const mine = area.value;
              try { file = await get(url); edit(mine, true); } catch (e) { mount(status, errorBox(e)); }
            } }, "Load the new version"));
        } else mount(status, errorBox(err));
      }
    };
    mount(root,
      h("p", { class: "crumbs" }, h("a", { href: ctx.link("files") }, "Files"), " / ", ctx.arg),
      h("h2", {}, "Editing " + ctx.arg.split("/").pop()),
      newer ? h("details", { class: "newer", open: true }, h("summary", {}, "The version now on the server"),
        h("pre", { class: "plain" }, file.text),
        h("p", { class: "muted" }, "Your text is in the editor below; saving it replaces this version.")) : null,
      h("form", { class: "edit", onsubmit: save, onkeydown: (e) => { if ((e.ctrlKey || e.metaKey) && e.key === "s") save(e); } },
        area, status,
        h("div", { class: "actions" },
          h("button", { type: "submit" }, "Save"),
          h("button", { type: "button", class: "secondary", onclick: show }, "Cancel"))));
    area.focus();
  }

  show();
  return root;
}
