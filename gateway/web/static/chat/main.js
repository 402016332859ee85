// kith web chat: wires the socket (docs/protocol.md), the person's API (docs/api.md) and the panels.
import { currentMe, refreshMe, setFallbackUser, signIn } from "./api.js";
import { Composer } from "./composer.js";
import { Attachments } from "./attach.js";
import { approvalCard } from "./approvals.js";
import { MessageLog } from "./log.js";
import { el, setupPanel } from "./panels.js";
import { PersonPanel } from "./person.js";
import { installCopyHandler, ready as rendererReady } from "./render.js";
import { SessionsPanel } from "./sessions.js";
import { ArchiveActions } from "./archive.js";
import { Wizard } from "./wizard.js";
import { VoiceInput } from "./voice.js";
import { SettingsPanel } from "./settings.js";
import { ChatSocket } from "./socket.js";
import { Working } from "./working.js";
import { MessageTools } from "./tools.js";
import { setupThemeToggle } from "./theme.js";

const $ = (id) => document.getElementById(id);
const HISTORY_PAGE = 50;

function newClientId() {
  const id = "web-" + (crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2));
  localStorage.setItem("kith.client_id", id);
  return id;
}
let clientId = localStorage.getItem("kith.client_id") || newClientId();

// What the page knows about the person and the conversation, merged from `ready`, `state`, `reply`
// frames and GET /api/me; every view is drawn from it.
// `tier` is the person's own choice (API); `effective_tier` what this conversation runs at (socket frames).
const person = { user_id: "", display_name: "", persona: "", tier: null, effective_tier: null, timezone: "",
  accounts: [], otr: false, session_id: "" };

// Socket frames name the conversation's tier `tier`; the API names the person's own choice so.
function fromSocket(frame) {
  const { tier, ...rest } = frame;
  return tier === undefined ? rest : { ...rest, effective_tier: tier };
}

let seq = 0;
const pending = new Map(); // message id -> {text, bubble (streaming reply) or null, acc (streamed text)}
const historyAsked = new Map(); // history request id -> "replace" | "prepend"

const log = new MessageLog($("log"), { onLoadEarlier: (before) => requestHistory(before) });
installCopyHandler(document.body);
new MessageTools({
  root: $("log"),
  canRedo: () => pending.size === 0 && $("archive").hidden,
  onRegenerate: (turn, text) => {
    const id = sendText(text, [], turn);
    if (!id) return;
    mark(id, log.bubble("user", text), "Regenerate");
  },
  onEdit: (turn, text) => startEditing(turn, text),
});

// Edit: the last message goes back into the box; sending it redoes that exchange.
let editing = null; // the turn being edited
function startEditing(turn, text) {
  editing = turn;
  $("input").value = text;
  $("input").dispatchEvent(new Event("input"));
  $("editing").hidden = false;
  $("input").focus();
}
function stopEditing() {
  editing = null;
  $("editing").hidden = true;
}
$("edit-cancel").addEventListener("click", () => { stopEditing(); $("input").focus(); });

// A message that redoes the last exchange says so (live only: the history keeps both attempts as said).
function mark(id, mine, how) {
  mine.classList.add("redo");
  mine.dataset.redo = how === "Edit" ? "Edited" : "Regenerated";
  const p = pending.get(id);
  if (p) p.mine = mine;
  for (const old of $("log").querySelectorAll(".msg.me, .msg.bot")) {
    if (old.dataset.turn && old.dataset.turn === p?.redo) old.classList.add("superseded");
  }
}
const working = new Working({ log, stop: $("stop"), sendCancel: (id) => socket.send({ type: "cancel", id }) });

const socket = new ChatSocket({
  clientId,
  onFrame: handle,
  onClose: () => {
    setConn("reconnecting…", "off");
    $("send").disabled = true;
    // Messages not answered yet were dropped by the server (docs/protocol.md): back into the box.
    for (const [id, p] of pending) {
      if (p.bubble) p.bubble.remove();
      else composer.restore(p.text, "The connection dropped before this was answered; it is back in the box.");
      pending.delete(id);
    }
    working.clear();
    historyAsked.clear();
    historyBusy();
  },
  onLocked: () => { setConn("locked", "off"); $("auth").showModal(); },
});

function nextId() { return `${++seq}-${Date.now()}`; }

function sendText(text, files = [], redo = null) {
  const id = nextId();
  const frame = { type: "message", id, text };
  if (files.length) frame.attachments = files.map((f) => f.id); // docs/protocol.md#attachments
  if (redo) frame.redo = redo; // docs/protocol.md#regenerate-and-edit
  if (!socket.send(frame)) return null;
  pending.set(id, { text, bubble: null, acc: "", mine: null, redo });
  working.add(id);
  return id;
}

const attachments = new Attachments({
  tray: $("attachments"), picker: $("attach-input"), pickButton: $("attach"), camera: $("camera-input"),
  cameraButton: $("camera"), dropZone: document.body, input: $("input"),
  onProblem: (why) => composer.showError(why),
});

const composer = new Composer({
  form: $("composer"), input: $("input"), button: $("send"), error: $("composer-error"), attachments,
  onSend: (text) => {
    const files = attachments.ready();
    const redo = editing;
    const id = sendText(text, files, redo);
    if (!id) return false;
    const mine = log.bubble("user", text, { files: files.map((f) => ({ name: f.name, file: f.file })) });
    pending.get(id).mine = mine;
    if (redo) { mark(id, mine, "Edit"); stopEditing(); }
    return true;
  },
});

// A voice message: sent as soon as it is recorded; the answer's history shows what was understood.
new VoiceInput({
  button: $("mic"), label: $("mic-time"), onProblem: (why) => composer.showError(why),
  onRecorded: (file) => {
    const id = sendText("", [file]);
    if (!id) { composer.showError("Not connected: the voice message was not sent."); return; }
    const mine = log.bubble("user", "", { files: [{ name: file.name, file: file.file }] });
    mine.classList.add("voice");
    Object.assign(pending.get(id), { mine, voice: true });
  },
});

const personPanel = new PersonPanel({
  name: $("p-name"), persona: $("p-persona"), user: $("p-user"), accounts: $("p-accounts"),
  linkNew: $("link-new"), linkForm: $("link-form"), linkCode: $("link-code"), out: $("link-out"),
  actions: $("link-actions"), confirm: $("link-confirm"), cancel: $("link-cancel"),
  sendCommand: (text) => {
    const id = sendText(text);
    if (id) log.bubble("user", text);
    return id;
  },
});

const settings = new SettingsPanel({
  form: $("settings-form"), name: $("s-name"), tz: $("s-tz"), persona: $("s-persona"),
  personas: $("s-personas"), tier: $("s-tier"), status: $("settings-status"), otr: $("s-otr"),
  otrLabel: $("s-otr-label"),
  sendCommand: (text) => {
    const id = sendText(text);
    if (id) log.bubble("user", text);
    return id;
  },
  onSaved: (saved) => update(saved),
});

const sessions = new SessionsPanel({
  dialog: $("sessions"), form: $("search-form"), query: $("search"), mode: $("search-mode"),
  list: $("sessions-list"), status: $("sessions-status"), more: $("sessions-more"),
  archive: $("archive"), bar: $("archive-bar"), close: $("archive-close"),
  onArchive: (on) => {
    $("archive").hidden = !on;
    $("archive-bar").hidden = !on;
    $("log").hidden = on;
    $("composer").hidden = on;
    if (!on) $("input").focus();
  },
  onShow: (session) => archiveActions.show(session),
});

const archiveActions = new ArchiveActions({
  sessions, title: $("archive-title"), state: $("archive-state"), status: $("archive-status"),
  continueBtn: $("archive-continue"), renameBtn: $("archive-rename"), exportBtn: $("archive-export"),
  deleteBtn: $("archive-delete"), renameForm: $("rename-form"), renameInput: $("rename-input"),
  renameCancel: $("rename-cancel"), confirm: $("delete-confirm"),
  // The chat now writes into the continued conversation: its history replaces the log.
  onContinued: (session) => {
    sessions.closeArchive();
    update({ session_id: session.session_id });
    requestHistory(null);
  },
  onDeleted: (session, answer) => {
    sessions.closeArchive();
    // The conversation shown was the one deleted: the next message starts a new one.
    if (session.session_id === person.session_id) { log.clear(); update({ session_id: "" }); }
    const kept = answer.facts_kept
      ? ` ${answer.facts_kept} fact${answer.facts_kept === 1 ? "" : "s"} kith learned from it ${answer.facts_kept === 1 ? "is" : "are"} kept (see Memory).`
      : "";
    log.bubble("notice", `Deleted the conversation “${session.title || "untitled"}”.${kept}`);
  },
});

const wizard = new Wizard({
  dialog: $("wizard"), form: $("wizard-form"), urlRow: $("w-url-row"), url: $("w-url"), key: $("w-key"),
  test: $("w-test"), status: $("w-status"), model: $("w-model"), models: $("w-models"), later: $("w-later"),
  offer: $("setup-offer"), openBtn: $("setup-open"),
  onReady: (state) => {
    $("notice").hidden = true;
    log.bubble("notice", `The model is ready: ${state.model} (${state.provider}). Say hello.`);
    $("input").focus();
  },
});

setupThemeToggle($("theme-btn"));
// Installable, and the page itself opens offline (docs/web.md#installing-the-app). Browsers allow a
// service worker on https and on localhost only; elsewhere the page works as before without one.
if ("serviceWorker" in navigator && window.isSecureContext) {
  navigator.serviceWorker.register("/sw.js").catch((err) => console.warn("kith: no service worker", err));
}

setupPanel($("person"), $("person-btn"), { onOpen: () => { personPanel.show(person); refresh(); } });
setupPanel($("settings"), $("settings-btn"), { onOpen: () => { settings.show(person); refresh(); } });
setupPanel($("sessions"), $("sessions-btn"), { onOpen: () => sessions.opened() });

// Escape also leaves a past session (panels close themselves: they are dialogs).
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && !$("archive").hidden && !document.querySelector("dialog[open]") && $("rename-form").hidden) {
    sessions.closeArchive();
  }
});

async function refresh() {
  const me = await refreshMe();
  if (me) update(me);
}

function update(fields) {
  for (const key of Object.keys(person)) {
    if (fields[key] !== undefined) person[key] = fields[key];
  }
  if (fields.personas !== undefined) person.personas = fields.personas;
  $("person-name").textContent = person.display_name || "you";
  $("persona").textContent = person.persona ? ` · ${person.persona}` : "";
  setOtr(person.otr);
  $("session").textContent = person.session_id
    ? (person.otr ? "otr " : "session ") + person.session_id.slice(-8) : "";
  if ($("person").open) personPanel.show(person);
  if ($("settings").open && !$("settings").contains(document.activeElement)) settings.show(person);
  else settings.setOtr(person.otr);
}

function setConn(text, cls) {
  const conn = $("conn");
  conn.textContent = text;
  conn.className = "pill " + cls;
}

function setOtr(on) {
  $("otr").hidden = !on;
  document.body.classList.toggle("otr", !!on);
  settings?.setOtr(!!on);
}

function requestHistory(beforeSeq) {
  const id = `h${++seq}`;
  const frame = { type: "history", id, limit: HISTORY_PAGE };
  if (beforeSeq !== null && beforeSeq !== undefined) frame.before_seq = beforeSeq;
  if (socket.send(frame)) historyAsked.set(id, frame.before_seq === undefined ? "replace" : "prepend");
  historyBusy();
}

// The log is busy while its conversation is being replaced, so a screen reader waits for the whole
// conversation (and a test knows when what it counts is there).
function historyBusy() {
  if ([...historyAsked.values()].includes("replace")) $("log").setAttribute("aria-busy", "true"); // "" means false
  else $("log").removeAttribute("aria-busy");
}

function handle(f) {
  switch (f.type) {
    case "ready": {
      setConn("connected", "on");
      $("send").disabled = false;
      setFallbackUser(f.user_id);
      update(fromSocket(f));
      const notice = $("notice");
      notice.hidden = !f.notice;
      notice.textContent = f.notice || "";
      // No model yet: the operator gets the set-up instead of the notice (docs/web.md#setting-up-the-model).
      if (f.model_ready !== undefined) {
        wizard.modelState(f.model_ready).then((offered) => { if (offered) notice.hidden = true; });
      }
      requestHistory(null);
      if (!currentMe()) refresh();
      break;
    }
    case "history": {
      const mode = historyAsked.get(f.id) || "replace";
      historyAsked.delete(f.id);
      historyBusy();
      // A turn streaming right now stays below the replayed conversation.
      const streaming = [...pending.values()].map((p) => p.bubble).filter(Boolean);
      // Missed messages (sent with ready, before this answer) are not in the history: they stay too.
      const missed = mode === "replace" ? [...$("log").querySelectorAll(".msg.missed")] : [];
      log.page(f.messages || [], f.more, { replace: mode === "replace" });
      for (const b of [...missed, ...streaming]) $("log").appendChild(b);
      if (f.session_id) update({ session_id: f.session_id });
      break;
    }
    case "state":
      update(fromSocket(f));
      break;
    case "status":
      working.status(f);
      break;
    case "delta": {
      const p = pending.get(f.id);
      if (!p) break;
      working.token(f.id);
      p.acc += f.text;
      if (!p.bubble) p.bubble = log.bubble("assistant", "", { streaming: true });
      log.stream(p.bubble, p.acc);
      break;
    }
    case "reply":
      onReply(f);
      break;
    case "error":
      onError(f);
      break;
    default:
      break;
  }
}

function onReply(f) {
  const p = f.id !== null && f.id !== undefined ? pending.get(f.id) : undefined;
  pending.delete(f.id);
  if (p) working.done(f.id);
  const fields = {};
  if (typeof f.otr === "boolean") fields.otr = f.otr;
  if (f.session_id) fields.session_id = f.session_id;
  update(fields);
  if (f.dropped) { p?.bubble?.remove(); return; }
  if (f.model_error && p) { modelDown(p, f.text); return; }
  const role = f.notice ? "notice" : "assistant";
  if (p?.mine && f.turn_id && !f.notice) p.mine.dataset.turn = f.turn_id;
  let el;
  if (p?.bubble) {
    el = p.bubble;
    log.finish(el, role, f.text);
  } else {
    el = log.bubble(role, f.text, { at: f.created_at });
    // Sent while no tab was open, shown on this connection (docs/protocol.md#missed-messages).
    if (f.missed) el.classList.add("missed");
  }
  // A voice message: the stored message holds what the transcription understood; show it.
  if (p?.voice && !f.notice) requestHistory(null);
  // Stopped with the Stop button: the text shown so far, marked (docs/protocol.md#stopping-a-reply).
  if (f.stopped) el.classList.add("stopped");
  if (f.buttons) approvalCard(el, f.buttons, (command) => sendText(command)); // docs/tools.md#approvals
  if (role === "assistant" && f.turn_id) el.dataset.turn = f.turn_id;
  // Answers to the person panel's /link commands, and the other account's link news, show there too.
  const linkNews = f.proactive && /\/link confirm|^Linked\.|cancelled the link/.test(f.text || "");
  if (personPanel.answer(f.id, f.text) || linkNews) {
    if (linkNews) personPanel.showOut(f.text);
    // A link may have merged this browser's person into the other one: sign in afresh as whoever
    // this browser is now (a cookie of the merged-away person is void).
    if (/^Linked\./.test(f.text || "")) signIn(clientId).then((me) => me && update(me));
    else refresh();
  }
}

// The model call failed (docs/protocol.md#when-the-model-fails): the server did not keep the message,
// so Retry sends it again, as the same bubble; the box says what failed.
function modelDown(p, why) {
  p.bubble?.remove();
  for (const old of $("log").querySelectorAll(".msg.model-down")) old.remove();
  const box = log.bubble("error", "");
  box.classList.add("model-down");
  box.setAttribute("role", "alert");
  const retry = el("button", { type: "button", class: "retry", text: "Retry" });
  box.append(el("strong", { text: "The model is not answering." }), el("div", { class: "why", text: why }),
    el("div", { class: "row" }, retry));
  retry.addEventListener("click", () => {
    const id = sendText(p.text, [], p.redo);
    if (!id) return;
    box.remove();
    pending.get(id).mine = p.mine;
  });
  retry.focus({ preventScroll: true });
}

function onError(f) {
  if (f.code === "unauthorized") return; // the sign-in dialog says what to do; the socket closes with 4401
  if (f.code === "account_taken") {
    // This browser's id belongs to someone else (another person signed in here before): the signed-in
    // person gets a fresh id of their own, and the socket reconnects with it.
    clientId = newClientId();
    socket.clientId = clientId;
    socket.ws?.close();
    return;
  }
  if (historyAsked.delete(f.id)) { historyBusy(); log.setMore(false); return; } // a server without history: nothing to page
  const p = f.id !== undefined ? pending.get(f.id) : undefined;
  if (p) {
    pending.delete(f.id);
    working.done(f.id);
    p.bubble?.remove();
    // The refused message leaves the log and goes back into the box, with the reason.
    const mine = p.mine || [...$("log").querySelectorAll(".msg.me")].reverse().find((b) => b.textContent === p.text);
    mine?.remove();
    for (const old of $("log").querySelectorAll(".msg.superseded")) old.classList.remove("superseded");
    composer.restore(p.text, explain(f));
    return;
  }
  log.bubble("error", explain(f));
}

function explain(f) {
  if (f.code === "too_large" || f.code === "too_long") {
    return `The server refused this message as too long${f.limit ? ` (limit ${Number(f.limit).toLocaleString()})` : ""}. ` +
      "It is back in the box: shorten it or send it in parts.";
  }
  if (f.code === "rate_limited" || f.code === "busy") {
    return `${(f.message || "").replace(/[.!]?$/, ".")} Your message is back in the box.`;
  }
  return f.message || f.code || "error";
}

$("auth-form").addEventListener("submit", () => {
  sessionStorage.setItem("kith.token", $("token").value);
  start();
});

$("send").disabled = true;
update({});

let started = false;
async function start() {
  // Sign in first: the socket's upgrade then carries the cookie and links this browser to the person.
  if (!started) {
    started = true;
    // The renderer loads meanwhile (the two do not depend on each other): docs/benchmarks.md, "Web chat".
    const renderer = Promise.race([rendererReady, new Promise((r) => setTimeout(r, 1500))]);
    const me = await Promise.race([signIn(clientId), new Promise((r) => setTimeout(() => r(null), 3000))]);
    if (me) update(me);
    await renderer;
  }
  socket.connect();
}
start();
