// Scroll boxes a keyboard can reach (issue 23 items 1 and 4; axe `scrollable-region-focusable`).
// A wide table, formula or code block scrolls inside its own box on a phone; a mouse or a finger
// can scroll it, a keyboard only if focus can get in. Every page loads this module (build.py's
// site header), so no page marks its boxes by hand: any box below that scrolls (content wider or
// taller than the box) and holds nothing focusable gets tabindex="0" (Tab reaches it, the arrow
// keys scroll it), role="region" and a name; every box that scrolls gets class "scroll-box-on"
// and data-scrolls="x", "y" or "xy", which css/scroll-box.css draws as a shadow at each edge with more
// content beyond it. A box that stops scrolling (a wider window) loses what was added. The check
// runs on load, once web fonts are in, on resize, and in the animation frame after content is
// added or removed; <html data-scroll-boxes> is "pending" while a check is due and "done" after it
// (tests wait for "done").

// Boxes that may scroll: a page's own (class "scroll-box"), wide tables, display formulas, code
// blocks, and CodeMirror's scroller (CodeMirror's input sits outside it, so a scroller that
// scrolls becomes a tab stop of its own: the arrow keys scroll the code without moving the cursor).
const BOXES = ".scroll-box, .table-scroll, .tex-display, pre, .code, .CodeMirror-scroll";
const TABBABLE = "a[href], button, input, select, textarea, [tabindex]:not([tabindex='-1']), " +
                 "[contenteditable='true'], [contenteditable='']";
const OURS = "data-scroll-box";  // on boxes this module made reachable: the tabindex they had ("" if none)

function scrolls(box) {
  const style = getComputedStyle(box);
  const canX = ["auto", "scroll"].includes(style.overflowX);
  const canY = ["auto", "scroll"].includes(style.overflowY);
  const x = canX && box.scrollWidth > box.clientWidth + 1;
  const y = canY && box.scrollHeight > box.clientHeight + 1;
  return (x ? "x" : "") + (y ? "y" : "");
}

const NAME_CHARS = 80;  // a region's name is read out on every visit: keep it to a phrase
const short = (text) => {
  const one = text.trim().replace(/\s+/g, " ");
  return one.length > NAME_CHARS ? `${one.slice(0, NAME_CHARS - 1)}\u2026` : one;
};

/* A short name for the box: its table's caption, its data-scroll-label, or what it holds and the
 * heading of the section it sits in. */
function nameOf(box) {
  if (box.dataset.scrollLabel) return box.dataset.scrollLabel;
  const caption = box.querySelector("caption");
  if (caption && caption.textContent.trim()) return `Table: ${short(caption.textContent)}`;
  const kind = box.querySelector("table") ? "Table"
    : box.matches(".tex-display") ? "Formula"
    : box.matches(".CodeMirror-scroll") ? "Code view" : "Code";
  const section = box.closest("section, details, li, article");
  const heading = section && section.querySelector("h1, h2, h3, h4, summary");
  const title = heading ? short(heading.textContent) : "";
  return title ? `${kind} (scrolls): ${title}` : `${kind} (scrolls)`;
}

function update(box) {
  const axes = scrolls(box);
  if (!axes) {
    box.classList.remove("scroll-box-on");
    delete box.dataset.scrolls;
    if (box.hasAttribute(OURS)) {
      const had = box.getAttribute(OURS);  // CodeMirror's scroller comes with tabindex="-1"
      if (had) box.setAttribute("tabindex", had);
      else box.removeAttribute("tabindex");
      for (const name of ["role", "aria-label", OURS]) box.removeAttribute(name);
    }
    return;
  }
  box.classList.add("scroll-box-on");
  box.dataset.scrolls = axes;
  if (box.hasAttribute(OURS) || box.tabIndex >= 0 || box.querySelector(TABBABLE)) return;
  box.setAttribute(OURS, box.getAttribute("tabindex") || "");
  box.setAttribute("tabindex", "0");
  box.setAttribute("role", "region");
  box.setAttribute("aria-label", nameOf(box));
}

export function updateScrollBoxes(root = document) {
  for (const box of root.querySelectorAll(BOXES)) update(box);
}

let due = false;
function later() {
  if (due) return;
  due = true;
  document.documentElement.dataset.scrollBoxes = "pending";
  requestAnimationFrame(() => {
    due = false;
    updateScrollBoxes();
    document.documentElement.dataset.scrollBoxes = "done";
  });
}

function start() {
  later();
  if (document.fonts) document.fonts.ready.then(later);
  window.addEventListener("resize", later);
  new MutationObserver(later).observe(document.body, {childList: true, subtree: true});
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
