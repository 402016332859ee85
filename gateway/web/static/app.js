// kith web chat: speaks the WebSocket protocol of docs/protocol.md.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const log = $("log"), input = $("input"), form = $("composer"), conn = $("conn");
  const otrPill = $("otr"), sessionEl = $("session"), noticeEl = $("notice"), sendBtn = $("send");
  const clientId = localStorage.getItem("kith.client_id") || (() => {
    const id = "web-" + (crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2));
    localStorage.setItem("kith.client_id", id); return id;
  })();
  let ws = null, seq = 0, retry = 0, ready = false;
  const pending = new Map(); // message id -> bubble element being streamed

  function bubble(cls, text) {
    const el = document.createElement("div");
    el.className = "msg " + cls;
    el.textContent = text;
    log.appendChild(el);
    log.scrollTop = log.scrollHeight;
    return el;
  }
  function setConn(state) {
    conn.textContent = state; conn.className = "pill " + (state === "connected" ? "on" : "off");
  }
  function setOtr(on) { otrPill.hidden = !on; document.body.classList.toggle("otr", !!on); }

  function connect() {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    ws = new WebSocket(`${proto}//${location.host}/ws`);
    ws.onopen = () => {
      retry = 0;
      const token = sessionStorage.getItem("kith.token");
      const hello = { client_id: clientId, name: localStorage.getItem("kith.name") || "" };
      ws.send(JSON.stringify(token ? { type: "auth", token, ...hello } : { type: "hello", ...hello }));
    };
    ws.onmessage = (ev) => handle(JSON.parse(ev.data));
    ws.onclose = (ev) => {
      ready = false; sendBtn.disabled = true;
      if (ev.code === 4401) { setConn("locked"); $("auth").showModal(); return; }
      setConn("reconnecting…");
      setTimeout(connect, Math.min(10000, 500 * 2 ** retry++));
    };
  }

  function handle(f) {
    switch (f.type) {
      case "ready":
        ready = true; sendBtn.disabled = false; setConn("connected"); setOtr(f.otr);
        noticeEl.hidden = !f.notice; noticeEl.textContent = f.notice || "";
        break;
      case "delta": {
        let el = pending.get(f.id);
        if (!el) { el = bubble("bot streaming", ""); pending.set(f.id, el); }
        el.textContent += f.text; log.scrollTop = log.scrollHeight;
        break;
      }
      case "reply": {
        let el = pending.get(f.id); pending.delete(f.id);
        if (f.dropped) { if (el) el.remove(); break; }
        if (!el) el = bubble("bot", "");
        el.className = "msg " + (f.notice ? "notice" : "bot");
        el.textContent = f.text;
        if (typeof f.otr === "boolean") setOtr(f.otr);
        if (f.session_id) sessionEl.textContent = (f.otr ? "otr " : "session ") + f.session_id.slice(-8);
        log.scrollTop = log.scrollHeight;
        break;
      }
      case "error":
        if (f.id !== undefined && pending.has(f.id)) { pending.get(f.id).remove(); pending.delete(f.id); }
        bubble("error", f.message);
        break;
    }
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const text = input.value.trim();
    if (!text || !ready) return;
    const id = String(++seq) + "-" + Date.now();
    bubble("me", text);
    ws.send(JSON.stringify({ type: "message", id, text }));
    input.value = ""; input.style.height = "";
  });
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); form.requestSubmit(); }
  });
  input.addEventListener("input", () => { input.style.height = ""; input.style.height = input.scrollHeight + "px"; });
  $("auth-form").addEventListener("submit", () => {
    sessionStorage.setItem("kith.token", $("token").value); connect();
  });
  sendBtn.disabled = true;
  connect();
})();
