// The WebSocket of docs/protocol.md: hello (or auth), reconnect with backoff, frames to a handler.
import { token } from "./api.js";

// Proactive messages are acknowledged once shown (docs/protocol.md#acknowledging-proactive-messages);
// one sent again (its ack was lost with a killed daemon) is acknowledged again and not shown twice.
// Remembered by this page only: two tabs of one browser are both sent a live message and both show it.
const SHOWN_MAX = 500;
const shown = new Set();

// True the first time this page sees the delivery id.
function firstTime(id) {
  if (shown.has(id)) return false;
  shown.add(id);
  if (shown.size > SHOWN_MAX) shown.delete(shown.values().next().value);
  return true;
}

export class ChatSocket {
  constructor({ clientId, onFrame, onOpen, onClose, onLocked }) {
    this.clientId = clientId;
    this.onFrame = onFrame;
    this.onOpen = onOpen;
    this.onClose = onClose;
    this.onLocked = onLocked;
    this.ws = null;
    this.retry = 0;
    this.ready = false;
    this.timer = null;
  }

  connect() {
    clearTimeout(this.timer);
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${proto}//${location.host}/ws`);
    this.ws = ws;
    ws.onopen = () => {
      this.retry = 0;
      const t = token();
      const hello = { client_id: this.clientId, name: "", acks: true };
      ws.send(JSON.stringify(t ? { type: "auth", token: t, ...hello } : { type: "hello", ...hello }));
      this.onOpen?.();
    };
    ws.onmessage = (event) => {
      let frame;
      try { frame = JSON.parse(event.data); } catch { return; }
      if (frame.type === "ready") this.ready = true;
      const delivery = frame.type === "reply" && frame.proactive && typeof frame.delivery_id === "string";
      const show = !delivery || firstTime(frame.delivery_id);
      if (show) this.onFrame(frame);
      if (delivery) ws.send(JSON.stringify({ type: "ack", delivery_id: frame.delivery_id }));
    };
    ws.onclose = (event) => {
      if (this.ws !== ws) return;
      this.ready = false;
      if (event.code === 4401) { this.onLocked?.(); return; }
      this.onClose?.(event);
      this.timer = setTimeout(() => this.connect(), Math.min(10000, 500 * 2 ** this.retry++));
    };
  }

  // False when nothing was sent (not connected yet): the caller keeps the draft.
  send(frame) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN || !this.ready) return false;
    this.ws.send(JSON.stringify(frame));
    return true;
  }
}
