/* A step player: First / Back / Play / Next / Last buttons, an optional scrubber and speed
 * slider, and the arrow keys, over positions 0..last(). Shared by the tiling visualizer and the
 * ring view (js/visualizer.js, js/ring-viz.js); it knows nothing of what a step draws.
 *
 *   const player = createPlayer({last: () => steps.length, onChange: (pos) => draw(pos),
 *                                controls: {first, prev, play, next, end, scrub?, speed?},
 *                                intervalMs: () => 125, keys: true, live: eventTextElement});
 *   player.goTo(0); player.setPlaying(true); player.pos; player.playing
 *
 * Playing advances one position per interval and stops at the last; Play at the last position
 * starts again from 0. With `keys`, ← → Home End step and Space plays/pauses, unless focus is
 * in a form field (a focused button handles its own Space). While playing, `live` (the element
 * that describes the step) stops announcing every step to screen readers.
 */

export function createPlayer({last, onChange, controls, intervalMs = () => 900, keys = false, live = null}) {
  const {first, prev, play, next, end, scrub = null, speed = null} = controls;
  const state = {pos: 0, playing: false, timer: null};

  function refresh() {
    const max = last();
    const empty = max <= 0;
    first.disabled = state.pos === 0;
    prev.disabled = state.pos === 0;
    next.disabled = state.pos >= max;
    end.disabled = state.pos >= max;
    play.disabled = empty;
    if (scrub) {
      scrub.max = String(Math.max(0, max));
      scrub.value = String(state.pos);
      scrub.disabled = empty;
    }
  }

  function goTo(pos) {
    state.pos = Math.max(0, Math.min(last(), pos));
    if (state.pos >= last() && state.playing) setPlaying(false);
    onChange(state.pos);
    refresh();
  }

  function setPlaying(on) {
    state.playing = Boolean(on) && last() > 0;
    clearInterval(state.timer);
    state.timer = null;
    play.textContent = state.playing ? "Pause" : "Play";
    play.setAttribute("aria-label", state.playing ? "Pause" : "Play");
    play.setAttribute("aria-pressed", String(state.playing));
    if (live) live.setAttribute("aria-live", state.playing ? "off" : "polite");
    if (state.playing) {
      if (state.pos >= last()) goTo(0);
      state.timer = setInterval(() => goTo(state.pos + 1), intervalMs());
    }
  }

  const stepTo = (pos) => { setPlaying(false); goTo(pos); };
  first.addEventListener("click", () => stepTo(0));
  prev.addEventListener("click", () => stepTo(state.pos - 1));
  next.addEventListener("click", () => stepTo(state.pos + 1));
  end.addEventListener("click", () => stepTo(last()));
  play.addEventListener("click", () => setPlaying(!state.playing));
  if (scrub) scrub.addEventListener("input", () => stepTo(Number(scrub.value)));
  if (speed) speed.addEventListener("input", () => { if (state.playing) setPlaying(true); });
  if (keys) {
    document.addEventListener("keydown", (ev) => {
      const tag = ev.target && ev.target.tagName;
      if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA" || ev.altKey || ev.ctrlKey || ev.metaKey) return;
      if (last() <= 0) return;
      if (ev.key === "ArrowRight") stepTo(state.pos + 1);
      else if (ev.key === "ArrowLeft") stepTo(state.pos - 1);
      else if (ev.key === "Home") stepTo(0);
      else if (ev.key === "End") stepTo(last());
      else if (ev.key === " " || ev.code === "Space") {
        if (tag === "BUTTON") return;  // the focused button handles its own activation
        setPlaying(!state.playing);
      } else return;
      ev.preventDefault();
    });
  }

  return {
    goTo, setPlaying, refresh,
    get pos() { return state.pos; },
    get playing() { return state.playing; },
  };
}
