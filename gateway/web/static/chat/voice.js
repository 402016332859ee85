// The microphone button (docs/web.md#voice-messages): records with MediaRecorder, and a second press
// sends the recording as a voice message: uploaded like any file (POST /api/uploads), transcribed by
// the daemon's transcription model (docs/media.md), answered like typed text. The bubble then shows
// what was understood (the stored message: the transcript and the voice note).
import { upload } from "./api.js";

const MAX_SECONDS = 120; // a longer note is cut here (and sent)
// In the order tried: what the daemon accepts (gateway/media/sniff.py) and browsers record.
const TYPES = ["audio/webm;codecs=opus", "audio/ogg;codecs=opus", "audio/webm", "audio/mp4"];

export class VoiceInput {
  // `onRecorded(file)`: send it (returns false when it could not go); `onProblem(text)`.
  constructor({ button, label, onRecorded, onProblem }) {
    Object.assign(this, { button, label, onRecorded, onProblem });
    this.recorder = null;
    this.timer = null;
    this.supported = !!(navigator.mediaDevices?.getUserMedia && window.MediaRecorder);
    button.hidden = !this.supported;
    button.addEventListener("click", () => (this.recorder ? this.stop() : this.start()));
  }

  async start() {
    let stream;
    try {
      stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    } catch (err) {
      this.onProblem(`The microphone is not available: ${err.message || err.name}.`);
      return;
    }
    const mimeType = TYPES.find((t) => MediaRecorder.isTypeSupported(t)) || "";
    const recorder = new MediaRecorder(stream, mimeType ? { mimeType } : {});
    const chunks = [];
    recorder.addEventListener("dataavailable", (e) => { if (e.data.size) chunks.push(e.data); });
    recorder.addEventListener("stop", () => {
      for (const track of stream.getTracks()) track.stop();
      this.send(chunks, recorder.mimeType || mimeType || "audio/webm");
    });
    recorder.start(250); // a chunk every 250 ms: a short note still has data
    this.recorder = recorder;
    const started = Date.now();
    this.paint(0);
    this.timer = setInterval(() => {
      const seconds = Math.floor((Date.now() - started) / 1000);
      this.paint(seconds);
      if (seconds >= MAX_SECONDS) this.stop();
    }, 250);
  }

  stop() {
    clearInterval(this.timer);
    this.timer = null;
    const recorder = this.recorder;
    this.recorder = null;
    this.paint(null);
    if (recorder && recorder.state !== "inactive") recorder.stop();
  }

  // null: not recording.
  paint(seconds) {
    const on = seconds !== null;
    this.button.classList.toggle("recording", on);
    this.button.setAttribute("aria-pressed", on ? "true" : "false");
    this.button.setAttribute("aria-label", on ? "Stop and send the voice message" : "Record a voice message");
    this.button.title = this.button.getAttribute("aria-label");
    this.label.hidden = !on;
    if (on) this.label.textContent = `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
    document.body.classList.toggle("recording", on);
  }

  async send(chunks, type) {
    const bare = type.split(";")[0];
    const blob = new Blob(chunks, { type: bare });
    if (!blob.size) { this.onProblem("Nothing was recorded."); return; }
    const ext = bare === "audio/ogg" ? "ogg" : bare === "audio/mp4" ? "m4a" : "webm";
    const file = new File([blob], `voice-message.${ext}`, { type: bare });
    this.button.disabled = true;
    try {
      const answer = await upload(file);
      this.onRecorded({ id: answer.upload_id, name: file.name, file });
    } catch (err) {
      this.onProblem(`The voice message could not be sent: ${err.message}`);
    } finally {
      this.button.disabled = false;
    }
  }
}
