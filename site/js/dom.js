/* Small helpers every page module shares (one copy, imported where needed).
 *
 *   el("p", {class: "small", text: "hello", "data-testid": "x"}, child, ...)
 *       -> a new element: `text` sets textContent, `class` the class name, any other key an
 *          attribute; null/undefined attributes and children are skipped
 *   bytesToBase64(Uint8Array) -> string,  base64ToBytes(string) -> Uint8Array
 */

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined) continue;
    if (key === "text") node.textContent = value;
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

export function bytesToBase64(bytes) {
  let raw = "";
  const chunk = 0x8000;  // String.fromCharCode takes a bounded number of arguments
  for (let i = 0; i < bytes.length; i += chunk) raw += String.fromCharCode(...bytes.subarray(i, i + chunk));
  return btoa(raw);
}

export function base64ToBytes(text) {
  const raw = atob(text);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}
