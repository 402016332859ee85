// Files for the next message (docs/media.md#web-chat): dropped on the page, pasted, picked with the
// paperclip or taken with the camera on a phone. Each is uploaded at once (POST /api/uploads) and shown
// as a chip above the box, removable until the message goes; the message frame then names their ids.

import { cancelUpload, upload } from "./api.js";

export const MAX_FILES = 8; // docs/protocol.md#attachments
export const MAX_BYTES = 20 * 1024 * 1024; // docs/media.md#limits

export class Attachments {
  constructor({ tray, picker, pickButton, camera, cameraButton, dropZone, input, onProblem }) {
    this.tray = tray;
    this.onProblem = onProblem;
    this.items = []; // {file, id, state: "uploading" | "ready" | "failed", chip}
    pickButton.addEventListener("click", () => picker.click());
    cameraButton.addEventListener("click", () => camera.click());
    for (const el of [picker, camera]) {
      el.addEventListener("change", () => { this.add([...el.files]); el.value = ""; });
    }
    input.addEventListener("paste", (e) => {
      const files = [...(e.clipboardData?.files || [])];
      if (files.length) { e.preventDefault(); this.add(files); }
    });
    const hasFiles = (e) => [...(e.dataTransfer?.types || [])].includes("Files");
    dropZone.addEventListener("dragover", (e) => {
      if (!hasFiles(e)) return;
      e.preventDefault();
      document.body.classList.add("dropping");
    });
    dropZone.addEventListener("dragleave", (e) => {
      if (e.relatedTarget === null) document.body.classList.remove("dropping");
    });
    dropZone.addEventListener("drop", (e) => {
      document.body.classList.remove("dropping");
      if (!hasFiles(e)) return;
      e.preventDefault();
      this.add([...e.dataTransfer.files]);
    });
  }

  add(files) {
    for (const file of files) {
      if (this.items.length >= MAX_FILES) {
        this.onProblem(`At most ${MAX_FILES} files go with one message.`);
        break;
      }
      if (file.size > MAX_BYTES) {
        this.onProblem(`${file.name} is ${(file.size / 1048576).toFixed(1)} MB; the limit is 20 MB.`);
        continue;
      }
      const item = { file, id: "", state: "uploading", chip: null, abort: new AbortController() };
      item.chip = this.chip(file, item);
      this.items.push(item);
      this.show();
      upload(file, item.abort.signal).then((answer) => {
        item.id = answer.upload_id;
        item.state = "ready";
        if (item.removed) this.cancel(item); // removed while its answer was on the way
      }, (err) => {
        item.state = "failed";
        if (!item.removed) this.onProblem(`${file.name} could not be uploaded: ${err.message}`);
      }).finally(() => this.paint(item));
    }
  }

  chip(file, item) {
    const chip = document.createElement("span");
    chip.className = "attachment uploading";
    chip.title = file.name;
    const label = document.createElement("span");
    label.textContent = file.name || "pasted image";
    const remove = document.createElement("button");
    remove.type = "button";
    remove.className = "remove";
    remove.textContent = "✕";
    remove.setAttribute("aria-label", `Remove ${file.name}`);
    remove.addEventListener("click", () => {
      this.items = this.items.filter((i) => i.chip !== chip);
      chip.remove();
      this.show();
      // The server lets go of it too: an upload still being sent is aborted, a finished one dropped.
      item.removed = true;
      if (item.state === "uploading") item.abort.abort();
      else if (item.state === "ready") this.cancel(item);
    });
    chip.append(label, remove);
    this.tray.append(chip);
    return chip;
  }

  cancel(item) {
    cancelUpload(item.id).catch(() => { /* already sent or expired: nothing is held */ });
  }

  paint(item) {
    item.chip.classList.toggle("uploading", item.state === "uploading");
    item.chip.classList.toggle("failed", item.state === "failed");
  }

  show() { this.tray.hidden = this.items.length === 0; }

  get count() { return this.items.length; }
  get busy() { return this.items.some((i) => i.state === "uploading"); }
  get failed() { return this.items.some((i) => i.state === "failed"); }
  // What goes with the message: the ready uploads' ids and names, and the files (for the sent bubble).
  ready() { return this.items.filter((i) => i.state === "ready").map((i) => ({ id: i.id, name: i.file.name, file: i.file })); }

  clear() {
    this.items = [];
    this.tray.replaceChildren();
    this.show();
  }
}
