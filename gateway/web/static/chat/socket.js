// The WebSocket of docs/protocol.md: hello (or auth), reconnect with backoff, frames to a handler.
import { token } from "./api.js";

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
      const hello = { client_id: this.clientId, name: "" };
      ws.send(JSON.stringify(t ? { type: "auth", token: t, ...hello } : { type: "hello", ...hello }));
      this.onOpen?.();
    };
    ws.onmessage = (event) => {
      let frame;
      try { frame = JSON.parse(event.data); } catch { return; }
      if (frame.type === "ready") this.ready = true;
      this.onFrame(frame);
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
