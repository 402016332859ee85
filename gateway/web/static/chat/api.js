// The person's HTTP API (docs/api.md): sign-in on loopback, CSRF header on every change.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code || "";
  }
}

let csrf = "";
let me = null;

export function token() { return sessionStorage.getItem("kith.token") || ""; }
export function currentMe() { return me; }

// "me" when signed in with a cookie; with the operator token alone, the user the WebSocket named.
let fallbackUser = "";
export function setFallbackUser(userId) { fallbackUser = userId || ""; }
export function userPath(suffix) {
  const uid = me ? "me" : fallbackUser;
  return `/api/users/${encodeURIComponent(uid || "me")}${suffix}`;
}

export async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && method !== "HEAD" && csrf) headers["X-CSRF-Token"] = csrf;
  const t = token();
  if (t && !me) headers.Authorization = "Bearer " + t;
  const response = await fetch(path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await response.json(); } catch { data = null; }
  if (!response.ok) {
    throw new ApiError(response.status, data?.error, data?.message || data?.error || response.statusText);
  }
  return data;
}

// The single local user is signed in automatically on loopback (no token configured); elsewhere the
// cookie comes from a one-time sign-in link, or there is none and the page runs on the socket alone.
export async function signIn(clientId) {
  try {
    await fetch("/api/session/local", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ client_id: clientId }),
    });
  } catch { /* offline: the socket's reconnect loop reports it */ }
  return refreshMe();
}

export async function refreshMe() {
  try {
    const fresh = await api("GET", "/api/me");
    if (fresh && fresh.user_id) {
      me = fresh;
      csrf = fresh.csrf || csrf;
    }
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 401) console.warn("kith: /api/me", err);
    me = null;
  }
  return me;
}

// A file for the next message (docs/protocol.md#attachments): the raw body with its own type.
// `signal` aborts it while it is still being sent (the chip removed mid-upload).
export async function upload(file, signal) {
  const headers = { Accept: "application/json", "Content-Type": file.type || "application/octet-stream",
    "X-Filename": encodeURIComponent(file.name || "pasted") };
  if (csrf) headers["X-CSRF-Token"] = csrf;
  const t = token();
  if (t && !me) headers.Authorization = "Bearer " + t;
  const response = await fetch("/api/uploads", { method: "POST", headers, credentials: "same-origin", body: file,
    signal });
  let data = null;
  try { data = await response.json(); } catch { data = null; }
  if (!response.ok) throw new ApiError(response.status, data?.error, data?.message || response.statusText);
  return data;
}

// Take back an upload no message used (its bytes stop counting against the person's upload budget).
export function cancelUpload(uploadId) {
  return api("DELETE", `/api/uploads/${encodeURIComponent(uploadId)}`, {});
}
