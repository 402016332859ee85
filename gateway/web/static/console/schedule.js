// The person's schedule: reminders (REMINDERS.md), scheduled prompts (CRONS.json) and task alerts
// (TASKS.json), each with when it fires next in the person's own time zone; cancelling one marks it in
// its file (the files are the truth). Everything comes from /api/users/{uid}/schedule (docs/proactive.md).
import { ApiError, del, enc, get } from "./api.js";
import { empty, errorBox, h, mount, toast } from "./dom.js";

const GROUPS = [
  ["reminder", "Reminders", "REMINDERS.md"],
  ["prompt", "Scheduled prompts", "CRONS.json"],
  ["task", "Task alerts", "TASKS.json"],
];
const STATUS = { pending: "ok", sent: "", done: "", cancelled: "bad", disabled: "bad" };

// "Tue 2 Jun, 08:00" in the person's zone (not the browser's: the schedule runs in theirs).
function inZone(iso, tz) {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  try {
    return new Intl.DateTimeFormat(undefined, { timeZone: tz, weekday: "short", day: "numeric", month: "short",
      year: d.getUTCFullYear() === new Date().getUTCFullYear() ? undefined : "numeric",
      hour: "2-digit", minute: "2-digit" }).format(d);
  } catch { return d.toLocaleString(); }
}

function itemRow(ctx, it, tz, reload) {
  const status = h("div", { class: "row-status", role: "status" });
  const active = it.status === "pending";
  const cancel = active ? h("button", { type: "button", class: "danger small", "aria-label": `Cancel: ${it.text}`,
    onclick: async (ev) => {
      if (!confirm(`Cancel "${it.text}"? It stays in ${it.file}, marked cancelled, and will not fire.`)) return;
      ev.target.disabled = true;
      try {
        await del(`/api/users/${enc(ctx.uid)}/schedule/${enc(it.id)}`);
        toast("Cancelled", "ok");
        reload();
      } catch (err) {
        ev.target.disabled = false;
        mount(status, err instanceof ApiError && err.status === 404
          ? h("p", { class: "error", role: "alert" }, "It is no longer active (fired, cancelled or edited meanwhile).")
          : errorBox(err));
      }
    } }, "Cancel") : null;
  return h("li", { class: "sched-item" + (active ? "" : " past"), dataset: { item: it.id } },
    h("div", { class: "run-head" },
      h("span", { class: "badge " + (STATUS[it.status] ?? "") }, it.status),
      h("strong", { class: "optext" }, it.text)),
    h("div", { class: "meta" },
      it.when ? h("span", {}, it.when) : null,
      it.next_due ? h("span", {}, " · next: ", h("time", { datetime: it.next_due }, inZone(it.next_due, tz))) : null,
      it.last ? h("span", {}, " · last: ", h("time", { datetime: it.last }, inZone(it.last, tz))) : null),
    cancel ? h("div", { class: "actions" }, cancel) : null,
    status);
}

export async function scheduleView(ctx) {
  const root = h("section", { class: "schedule" });
  let showPast = false;
  const load = async () => {
    const data = await get(`/api/users/${enc(ctx.uid)}/schedule`);
    const tz = data.timezone;
    const shown = data.items.filter((i) => showPast || i.status === "pending");
    const toggle = h("label", { class: "check" },
      h("input", { type: "checkbox", checked: showPast, onchange: (e) => { showPast = e.target.checked; load().catch(fail); } }),
      " Show sent, done and cancelled items");
    const groups = GROUPS.map(([kind, title, file]) => {
      const items = shown.filter((i) => i.kind === kind);
      return h("div", { class: "sched-group" },
        h("h3", {}, title, " ", h("span", { class: "count" }, String(items.length))),
        items.length ? h("ul", { class: "pairs" }, items.map((i) => itemRow(ctx, i, tz, () => load().catch(fail))))
          : empty(`Nothing in ${file}.`));
    });
    const problems = data.problems.length ? h("div", { class: "card", role: "note" },
      h("h3", {}, "Lines that could not be scheduled"),
      h("p", { class: "muted" }, "They are kept as written; fix them in the file or ask kith to."),
      h("ul", {}, data.problems.map((p) => h("li", {},
        h("code", {}, p.file + (p.line ? `:${p.line}` : "")), " ", p.message,
        p.text ? h("div", { class: "meta optext" }, p.text) : null)))) : null;
    mount(root, h("h2", {}, "Schedule"),
      h("p", { class: "muted" }, "Reminders, scheduled prompts and task alerts, with times in ",
        h("strong", {}, tz), ". Change the zone with ", h("code", {}, "/tz Europe/Berlin"), " in any chat."),
      problems, toggle, h("div", { class: "groups" }, groups));
  };
  const fail = (err) => mount(root, h("h2", {}, "Schedule"), errorBox(err));
  await load();
  return root;
}
