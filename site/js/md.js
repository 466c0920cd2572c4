// A small Markdown subset for exercise statements, built as DOM nodes (never innerHTML):
// paragraphs, "- " and "1. " lists, **bold**, *emphasis*, `code`, [links](url), $inline$ and $$display$$
// TeX. TeX lands in .tex / .tex-display elements that katex-render.js typesets.

const INLINE = /(`[^`]+`)|(\$[^$\n]+\$)|(\*\*[^*]+\*\*)|(\[[^\]]+\]\([^)\s]+\))|(\*[^*\s][^*]*\*)/g;

function inline(parent, text) {
  let last = 0;
  for (const match of text.matchAll(INLINE)) {
    if (match.index > last) parent.append(text.slice(last, match.index));
    const token = match[0];
    let node;
    if (match[1]) {
      node = document.createElement("code");
      node.textContent = token.slice(1, -1);
    } else if (match[2]) {
      node = document.createElement("span");
      node.className = "tex";
      node.textContent = token.slice(1, -1);
    } else if (match[3]) {
      node = document.createElement("strong");
      inline(node, token.slice(2, -2));
    } else if (match[5]) {
      node = document.createElement("em");
      inline(node, token.slice(1, -1));
    } else {
      const close = token.indexOf("](");
      node = document.createElement("a");
      const href = token.slice(close + 2, -1);
      // Only relative links and in-page anchors: the site makes no request off its origin.
      node.setAttribute("href", /^[a-z]+:/i.test(href) ? "#" : href);
      inline(node, token.slice(1, close));
    }
    parent.append(node);
    last = match.index + token.length;
  }
  if (last < text.length) parent.append(text.slice(last));
}

// Renders `source` into a new <div>; returns it.
export function renderMarkdown(source, className = "md") {
  const root = document.createElement("div");
  root.className = className;
  const blocks = String(source || "").split(/\n\s*\n/);
  for (const raw of blocks) {
    const block = raw.trim();
    if (!block) continue;
    if (block.startsWith("$$") && block.endsWith("$$") && block.length > 4) {
      // One display per $$...$$ (a block may hold several, one per line).
      for (const tex of block.split("$$").map((t) => t.trim()).filter(Boolean)) {
        const div = document.createElement("div");
        div.className = "tex-display";
        div.textContent = tex;
        root.append(div);
      }
      continue;
    }
    const lines = block.split("\n");
    const bullet = /^\s*-\s+/;
    const numbered = /^\s*\d+\.\s+/;
    if (lines.every((l) => bullet.test(l)) || lines.every((l) => numbered.test(l))) {
      const list = document.createElement(bullet.test(lines[0]) ? "ul" : "ol");
      for (const line of lines) {
        const li = document.createElement("li");
        inline(li, line.replace(bullet, "").replace(numbered, ""));
        list.append(li);
      }
      root.append(list);
      continue;
    }
    const p = document.createElement("p");
    inline(p, lines.join(" "));
    root.append(p);
  }
  return root;
}
