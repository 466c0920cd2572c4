/* Form helpers shared by the visualizer's two views. */

/* Replaces a <select>'s options with `values` and selects `wanted` (or the first value). */
export function fillSelect(select, values, wanted) {
  select.replaceChildren(...values.map((v) => {
    const o = document.createElement("option");
    o.value = String(v);
    o.textContent = String(v);
    return o;
  }));
  select.value = String(values.includes(wanted) ? wanted : values[0]);
}
