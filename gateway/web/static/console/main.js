// The memory console: a hash router over small views; everything it shows comes from /api (docs/api.md).
import { ApiError, get, signIn } from "./api.js";
import { errorBox, h, loading, mount } from "./dom.js";
import { loadRenderer } from "./render.js";
import { filesView } from "./files.js";
import { fileView } from "./file.js";
import { factsView } from "./facts.js";
import { recallView } from "./recall.js";
import { reviewView } from "./review.js";
import { distillView } from "./distill.js";
import { tidyView } from "./tidy.js";
import { sessionsView, sessionView } from "./sessions.js";
import { turnView } from "./turn.js";
import { pairingView } from "./pairing.js";
import { scheduleView } from "./schedule.js";
import { attentionView } from "./attention.js";
import { approvalsView } from "./approvals.js";

const VIEWS = {
  files: { label: "Files", render: filesView },
  file: { render: fileView, parent: "files" },
  facts: { label: "Facts", render: factsView },
  recall: { label: "Recall & forget", render: recallView },
  review: { label: "Quarantine & audit", personLabel: "Audit", render: reviewView },
  distill: { label: "Distillation", render: distillView },
  tidy: { label: "Tidy", render: tidyView },
  sessions: { label: "Turns", render: sessionsView },
  session: { render: sessionView, parent: "sessions" },
  turn: { render: turnView, parent: "sessions" },
  schedule: { label: "Schedule", render: scheduleView },
  approvals: { label: "Approvals", render: approvalsView },
  pairing: { label: "Pairing", render: pairingView, operator: true },
  attention: { label: "Needs attention", render: attentionView, operator: true },
};

const viewEl = document.getElementById("view");
const navEl = document.getElementById("nav");
const picker = document.getElementById("picker");
let me = null;
let renderSeq = 0;

export function link(uid, view, arg = "") {
  return `#/${encodeURIComponent(uid)}/${view}` + (arg ? "/" + arg.split("/").map(encodeURIComponent).join("/") : "");
}

function parse() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter((p) => p !== "");
  const uid = parts[0] ? decodeURIComponent(parts[0]) : "me";
  const view = VIEWS[parts[1]] ? parts[1] : "files";
  const arg = parts.slice(2).map(decodeURIComponent).join("/");
  return { uid, view, arg };
}

function drawNav(uid, view) {
  const current = VIEWS[view].parent || view;
  mount(navEl, Object.entries(VIEWS)
    .filter(([, v]) => v.label && (!v.operator || me.operator))
    .map(([name, v]) => h("a", { href: link(uid, name), "aria-current": name === current ? "page" : undefined },
      !me.operator && v.personLabel ? v.personLabel : v.label)));
  // On a phone the tabs scroll sideways: keep the current one in sight.
  const active = navEl.querySelector("[aria-current=page]");
  if (active) active.scrollIntoView({ block: "nearest", inline: "nearest" });
}

async function route(ev) {
  const focusAfter = ev instanceof HashChangeEvent;
  const seq = ++renderSeq;
  const { uid, view, arg } = parse();
  drawNav(uid, view);
  if (me.operator) picker.value = uid === "me" ? me.user_id || "" : uid;
  mount(viewEl, loading());
  const ctx = { uid, arg, me, view, link: (v, a) => link(uid, v, a), refresh: route };
  let node;
  try {
    node = await VIEWS[view].render(ctx);
  } catch (err) {
    node = err instanceof ApiError && err.status === 404
      ? h("section", {}, h("h2", {}, "Not found"), errorBox(err), h("p", {}, h("a", { href: link("me", "files") }, "Back to your memory")))
      : h("section", {}, h("h2", {}, "Something went wrong"), errorBox(err));
  }
  if (seq !== renderSeq) return; // a newer navigation won
  mount(viewEl, node);
  // Keyboard users land on the new view's heading after navigating.
  const heading = viewEl.querySelector("h2");
  if (heading && focusAfter) { heading.setAttribute("tabindex", "-1"); heading.focus(); }
}

async function setupPicker() {
  if (!me.operator) return;
  let users = [];
  try { users = (await get("/api/users")).users || []; } catch { return; }
  document.getElementById("picker-wrap").hidden = false;
  // Display names need not be unique: a repeated one is told apart by its user id.
  const seen = new Map();
  for (const u of users) seen.set(u.display_name, (seen.get(u.display_name) || 0) + 1);
  mount(picker, users.map((u) => h("option", { value: u.user_id },
    (u.display_name || u.user_id) + (u.display_name && seen.get(u.display_name) > 1 ? ` · ${u.user_id}` : "")
    + (u.user_id === me.user_id ? " (you)" : ""))));
  if (!users.some((u) => u.user_id === me.user_id)) picker.prepend(h("option", { value: "" }, "—"));
  picker.addEventListener("change", () => {
    const { view } = parse();
    const keep = VIEWS[view].parent ? VIEWS[view].parent : view;
    location.hash = link(picker.value || "me", keep);
  });
}

async function start() {
  try {
    me = await signIn();
  } catch (err) {
    mount(viewEl, h("section", {}, h("h2", {}, "Not signed in"),
      h("p", {}, "Open a sign-in link: send ", h("code", {}, "/web"), " to kith on a linked channel, or ask the operator for ",
        h("code", {}, "kith users login-link"), "."),
      errorBox(err)));
    return;
  }
  document.getElementById("me").textContent = (me.display_name || me.user_id || "operator") + (me.operator ? " · operator" : "");
  await Promise.all([loadRenderer(), setupPicker()]);
  if (!location.hash) history.replaceState(null, "", link(me.user_id ? "me" : (picker.value || "me"), "files"));
  window.addEventListener("hashchange", route);
  await route();
}

start();
