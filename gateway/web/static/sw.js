// kith's service worker (docs/web.md#installing-the-app): keeps the chat page's own files (the app
// shell) so the page opens without the daemon, and says it is offline instead of a browser error.
//
// Only the shell is ever handled: "/", the manifest and /static/. The API, the WebSocket, sign-in and
// media never pass through here, so nothing a person said or sent is stored in the browser's caches.
// Network first: kith revalidates its files on every load (an upgrade shows at once); the cache answers
// only when the daemon cannot be reached.

const CACHE = "kith-shell-v2";
// Precached at install (the page's first load happened before this worker existed). The test
// tests/web/test_chat_install.py checks that every file index.html loads is here.
const SHELL = [
  "/",
  "/manifest.webmanifest",
  "/static/chat.css",
  "/static/theme.js",
  "/static/kith.svg",
  "/static/icon.svg",
  "/static/vendor/markdown-it.mjs",
  "/static/vendor/purify.mjs",
  "/static/chat/api.js",
  "/static/chat/approvals.js",
  "/static/chat/archive.js",
  "/static/chat/attach.js",
  "/static/chat/composer.js",
  "/static/chat/excerpts.js",
  "/static/chat/log.js",
  "/static/chat/main.js",
  "/static/chat/media.js",
  "/static/chat/panels.js",
  "/static/chat/person.js",
  "/static/chat/render.js",
  "/static/chat/sessions.js",
  "/static/chat/settings.js",
  "/static/chat/socket.js",
  "/static/chat/theme.js",
  "/static/chat/tools.js",
  "/static/chat/working.js",
  "/static/chat/wizard.js",
  "/static/chat/voice.js",
];

function isShell(url) {
  return url.origin === self.location.origin &&
    (url.pathname === "/" || url.pathname === "/manifest.webmanifest" || url.pathname.startsWith("/static/"));
}

self.addEventListener("install", (event) => {
  event.waitUntil(caches.open(CACHE).then((cache) => cache.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(caches.keys()
    .then((names) => Promise.all(names.filter((n) => n.startsWith("kith-shell-") && n !== CACHE).map((n) => caches.delete(n))))
    .then(() => self.clients.claim()));
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.method !== "GET") return;
  const url = new URL(request.url);
  if (!isShell(url)) return; // the browser's own handling: API, /ws, /signin, media, the console
  event.respondWith(fromNetwork(request, url));
});

async function fromNetwork(request, url) {
  const key = url.pathname === "/" ? "/" : request; // "/?x" is the same page
  try {
    const response = await fetch(request);
    if (response.ok && response.type === "basic") {
      const copy = response.clone();
      caches.open(CACHE).then((cache) => cache.put(key, copy));
    }
    return response;
  } catch (err) {
    const cached = await caches.match(key, { ignoreSearch: true });
    if (cached) return cached;
    throw err;
  }
}
