/* Registers the service worker (sw.js) that keeps the whole site, Pyodide included, in the
 * browser's cache after the first visit, and asks it to bring the cache up to date on every
 * page load. Sets <html data-offline="ready | caching | error | unsupported"> from the worker's
 * status, for tests and styles. */

function setState(state) {
  document.documentElement.dataset.offline = state;
}

function askStatus(worker) {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.onmessage = (event) => resolve(event.data);
    worker.postMessage({type: "status"}, [channel.port2]);
  });
}

async function follow(registration) {
  const worker = registration.active || registration.waiting || registration.installing;
  if (!worker) return;
  if (registration.active) registration.active.postMessage({type: "refresh"});
  for (;;) {
    const current = registration.active;
    if (current) {
      const status = await askStatus(current);
      setState(status.state);
      if (status.state !== "caching") return;
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

async function register() {
  if (!("serviceWorker" in navigator)) {
    setState("unsupported");
    return;
  }
  setState("caching");
  try {
    const registration = await navigator.serviceWorker.register(new URL("../sw.js", import.meta.url));
    await navigator.serviceWorker.ready;
    await follow(registration);
  } catch (error) {
    setState("error");
    console.warn(`offline use unavailable: ${error.message}`);
  }
}

register();
