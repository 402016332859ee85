// The console's only way to the server: the person HTTP API of docs/api.md, cookie session + CSRF header.

export class ApiError extends Error {
  constructor(status, code, message, body) {
    super(message || code || `HTTP ${status}`);
    this.status = status; this.code = code; this.body = body;
  }
}

let csrf = null;

// The chat page keeps its WebSocket client id here; signing in with the same id maps both to one person.
export function clientId() {
  let id = localStorage.getItem("kith.client_id");
  if (!id) {
    id = "web-" + (crypto.randomUUID ? crypto.randomUUID() : String(Math.random()).slice(2));
    localStorage.setItem("kith.client_id", id);
  }
  return id;
}

async function send(method, path, body) {
  const headers = { Accept: "application/json" };
  // Every change is JSON, even a DELETE without a body: the server refuses anything else (a CSRF wall).
  if (method !== "GET") {
    headers["Content-Type"] = "application/json";
    if (csrf) headers["X-CSRF-Token"] = csrf;
  }
  const res = await fetch(path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  const text = await res.text();
  try { data = text ? JSON.parse(text) : null; } catch { data = { message: text }; }
  if (!res.ok) throw new ApiError(res.status, data && data.error, data && data.message, data);
  return { data, res };
}

export const get = async (path) => (await send("GET", path)).data;
export const post = async (path, body = {}) => (await send("POST", path, body)).data;
export const put = async (path, body) => (await send("PUT", path, body)).data;
export const del = async (path) => (await send("DELETE", path)).data;
export const raw = send;

// Who is signed in. On loopback without a token the local person is signed in automatically.
export async function signIn() {
  try {
    const me = await get("/api/me");
    csrf = me.csrf; return me;
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 401) throw err;
  }
  await post("/api/session/local", { client_id: clientId() });
  const me = await get("/api/me");
  csrf = me.csrf;
  return me;
}

export const enc = encodeURIComponent;
// A memory path keeps its slashes: the route is /memory/files/{path:.*}.
export const encPath = (p) => p.split("/").map(encodeURIComponent).join("/");
