/* Reading the recorded benchmark results (bench/results/*.json, copied into the built site).
 *
 * manifest.json lists the files a build shipped, so a record not yet made reads as {missing}
 * without a failed request; Python's json writes bare Infinity/NaN, read here as null.
 */

export async function listedFiles() {
  try {
    const response = await fetch("manifest.json");
    if (!response.ok) return null;
    return (await response.json()).files || null;
  } catch (error) {
    return null;  // no manifest (e.g. served from site/ directly): just try every file
  }
}

export async function loadResult(path, files) {
  if (files && !(path in files)) return {missing: true};
  try {
    const response = await fetch(path);
    if (response.status === 404) return {missing: true};
    if (!response.ok) return {error: `HTTP ${response.status} for ${path}`};
    return {data: parseLenient(await response.text())};
  } catch (error) {
    return {error: `${path} could not be read: ${error.message}`};
  }
}

/* JSON, tolerating the bare Infinity / NaN that Python's json module writes for float("inf")
 * (JSON has no such tokens): they are read as null, i.e. "no number". */
function parseLenient(text) {
  try {
    return JSON.parse(text);
  } catch (error) {
    return JSON.parse(text.replace(/(?<=[\[:,]\s*)-?(?:Infinity|NaN)(?=\s*[\],}])/g, "null"));
  }
}
