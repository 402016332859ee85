// An approval request (docs/tools.md#approvals) as a card: the host's notice asking the person to
// approve a tool call comes with its buttons ({label, command}); Approve and Deny send the command as
// the person's own message, exactly as typing it would. Only this person's tabs get the card, and the
// server checks again who answers. Once one is pressed, both are disabled.
export function approvalCard(bubble, buttons, send) {
  const wanted = (buttons || []).filter((b) => /^\/(approve|deny) [0-9a-f]+$/.test(b.command || ""));
  if (!bubble || !wanted.length) return;
  bubble.classList.add("approval");
  const bar = document.createElement("div");
  bar.className = "approval-actions";
  bar.setAttribute("role", "group");
  bar.setAttribute("aria-label", "Approval");
  // chat.css is the web chat's own; the card's layout is set here (CSSOM, which the CSP allows).
  Object.assign(bar.style, { display: "flex", gap: ".5rem", marginTop: ".5rem" });
  for (const b of wanted) {
    const el = document.createElement("button");
    el.type = "button";
    if (b.command.startsWith("/deny")) el.className = "ghost";
    el.textContent = b.label;
    el.addEventListener("click", () => {
      if (send(b.command) === null) return; // not connected: the buttons stay
      for (const other of bar.querySelectorAll("button")) other.disabled = true;
    });
    bar.append(el);
  }
  bubble.append(bar);
}
