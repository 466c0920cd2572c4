// Typesets every element with class "tex" (inline) or "tex-display" (display) using the
// vendored KaTeX (vendor/katex/katex.min.js, loaded as a classic script that defines
// window.katex). The TeX source is the element's text, so without KaTeX the page still
// shows readable TeX, and a notice says why it is not typeset.

export function renderMath(root = document) {
  const nodes = root.querySelectorAll(".tex, .tex-display");
  const katex = window.katex;
  if (!katex) {
    return { rendered: 0, error: "KaTeX (vendor/katex/katex.min.js) did not load; math is shown as TeX source." };
  }
  let rendered = 0;
  const failures = [];
  for (const el of nodes) {
    if (el.dataset.typeset === "1") continue;
    const source = el.textContent;
    try {
      katex.render(source, el, {
        displayMode: el.classList.contains("tex-display"),
        throwOnError: true,
        output: "htmlAndMathml",
      });
      el.dataset.typeset = "1";
      el.setAttribute("data-tex", source);
      rendered += 1;
    } catch (err) {
      failures.push(`${source.slice(0, 40)}: ${err.message}`);
    }
  }
  return { rendered, error: failures.length ? `KaTeX could not typeset ${failures.length} formula(s): ${failures[0]}` : null };
}
