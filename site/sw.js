/* The service worker: the lab works offline after one visit.
 *
 * Install (and every page load after it, through a "refresh" message from js/offline.js) reads
 * manifest.json and brings the cache in line with it: every file the build lists (the pages,
 * scripts, data, the nlpcore wheel and the Pyodide runtime with NumPy) is fetched into the cache
 * when its sha256 differs from the one cached, and files the build no longer lists are dropped.
 * So after the first visit the whole site is here, and a rebuild updates only what changed.
 *
 * Requests are network first: online, the page always gets the server's current file (and the
 * cache takes a copy); when the network fails, the cached copy answers. Pages are matched
 * without their query string (exercise.html?id=... is exercise.html).
 *
 * State for pages and tests: the worker answers a "status" message with
 * {state: "ready" | "caching" | "error", cached, total, error}.
 */
"use strict";

const CACHE = "fa-lab-site-v1";
const RECORD = "__cached-manifest__";   // the manifest the cache holds, as a cache entry
const SCOPE = new URL("./", self.location.href);
const TEST_ONLY = ["vendor/axe-core/"];  // shipped for the browser tests; no page needs it offline

let status = {state: "caching", cached: 0, total: 0, error: null};
let refreshing = null;

function inScope(url) {
  return url.origin === SCOPE.origin && url.pathname.startsWith(SCOPE.pathname);
}

async function cachedRecord(cache) {
  const response = await cache.match(new URL(RECORD, SCOPE).href);
  if (!response) return {};
  try {
    return (await response.json()).files || {};
  } catch (error) {
    return {};
  }
}

/* Fetches what changed since the cached manifest; a file that fails is retried next time. */
async function refresh() {
  const cache = await caches.open(CACHE);
  const response = await fetch(new URL("manifest.json", SCOPE).href, {cache: "no-cache"});
  if (!response.ok) throw new Error(`manifest.json: HTTP ${response.status}`);
  const manifest = await response.clone().json();
  const files = manifest.files || {};
  const old = await cachedRecord(cache);
  const names = Object.keys(files).filter((name) => !TEST_ONLY.some((prefix) => name.startsWith(prefix)));
  status = {state: "caching", cached: 0, total: names.length + 2, error: null};
  const failed = [];
  for (const name of names) {
    const url = new URL(name, SCOPE).href;
    if (old[name] && old[name].sha256 === files[name].sha256 && await cache.match(url)) {
      status.cached += 1;
      continue;
    }
    try {
      const fresh = await fetch(url, {cache: "no-cache"});
      if (!fresh.ok) throw new Error(`HTTP ${fresh.status}`);
      await cache.put(url, fresh);
      status.cached += 1;
    } catch (error) {
      failed.push(`${name} (${error.message})`);
    }
  }
  for (const name of Object.keys(old)) {
    if (!(name in files)) await cache.delete(new URL(name, SCOPE).href);
  }
  await cache.put(new URL("manifest.json", SCOPE).href, response);
  const root = await fetch(SCOPE.href, {cache: "no-cache"}).catch(() => null);
  if (root && root.ok) await cache.put(SCOPE.href, root);
  status.cached += 2;
  const kept = {};
  for (const name of names) if (!failed.some((f) => f.startsWith(`${name} (`))) kept[name] = files[name];
  await cache.put(new URL(RECORD, SCOPE).href,
                  new Response(JSON.stringify({files: kept}), {headers: {"content-type": "application/json"}}));
  status = failed.length
    ? {state: "error", cached: status.cached, total: status.total,
       error: `${failed.length} files could not be cached: ${failed.slice(0, 3).join(", ")}`}
    : {state: "ready", cached: status.cached, total: status.total, error: null};
}

function startRefresh() {
  if (!refreshing) {
    refreshing = refresh().catch((error) => {
      status = {...status, state: "error", error: error.message};
    }).finally(() => { refreshing = null; });
  }
  return refreshing;
}

self.addEventListener("install", (event) => {
  event.waitUntil(startRefresh().then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) {
      if (name.startsWith("fa-lab-") && name !== CACHE) await caches.delete(name);
    }
    await self.clients.claim();
  })());
});

self.addEventListener("message", (event) => {
  const {type} = event.data || {};
  if (type === "refresh") event.waitUntil(startRefresh());
  if (type === "status" && event.ports[0]) event.ports[0].postMessage(status);
});

async function fromNetworkOrCache(request) {
  const cache = await caches.open(CACHE);
  try {
    const response = await fetch(request);
    if (response.ok && response.type === "basic") {
      const copy = response.clone();
      const key = new URL(request.url);
      key.search = "";
      cache.put(key.href, copy).catch(() => {});
    }
    return response;
  } catch (error) {
    const key = new URL(request.url);
    key.search = "";
    const cached = await cache.match(request) || await cache.match(key.href);
    if (cached) return cached;
    throw error;
  }
}

self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== "GET" || !inScope(url) || url.pathname.endsWith("/sw.js")) return;
  event.respondWith(fromNetworkOrCache(event.request));
});
