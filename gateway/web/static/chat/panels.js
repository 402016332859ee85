// Side panels are <dialog>s: modal focus, Escape closes them, focus returns to the button that opened them.

export function setupPanel(dialog, opener, { onOpen } = {}) {
  opener?.addEventListener("click", () => openPanel(dialog, onOpen));
  for (const close of dialog.querySelectorAll("[data-close]")) {
    close.addEventListener("click", () => dialog.close());
  }
  // A click on the backdrop (outside the panel's box) closes it, as people expect from a sheet.
  dialog.addEventListener("click", (event) => {
    if (event.target !== dialog) return;
    const r = dialog.getBoundingClientRect();
    const inside = event.clientX >= r.left && event.clientX <= r.right && event.clientY >= r.top && event.clientY <= r.bottom;
    if (!inside) dialog.close();
  });
}

export function openPanel(dialog, onOpen) {
  if (!dialog.open) dialog.showModal();
  onOpen?.();
}

export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key in node && key !== "list") node[key] = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}
