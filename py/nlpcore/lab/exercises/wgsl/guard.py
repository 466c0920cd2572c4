"""Loop guards: the learner's shader with a bound on every loop, so that one that never ends
stops by itself, says which loop it was, and leaves the GPU usable for the next run.

Why in the shader: a GPU driver stops a runaway shader with its watchdog and loses the device,
but a CPU adapter (SwiftShader, Chromium's WebGPU without a GPU) has none: an endless dispatch
keeps its GPU process busy until the browser restarts, and a fresh device or page hangs behind
it. The host cannot cancel a dispatch, so the shader has to end itself.

What :func:`instrument` does to each ``for``, ``while`` and ``loop`` (comments skipped, nested
``/* */`` included):

- a u32 counter per loop, a function-scope ``var`` declared at the top of the entry point, so
  that nothing resets it, not an outer loop nor a new call of a helper: a loop runs at most
  its budget + 1 iterations per invocation in total, however often it is entered. A helper
  that holds a loop (or calls one that does) gets its counters as ``ptr<function, u32>``
  parameters, one per call site, as if the helper were inlined there;
- as the first statement of the loop's body, before any of the learner's code (so that a
  ``continue`` cannot skip it): count, and once the count passes the loop's budget, note the
  trip in the storage buffer ``<prefix>_trips`` (word i: how often loop i was stopped) and
  ``break``. In ``loop { ... continuing { ... break if c; } }`` it sits in the body, where
  ``break`` is allowed.

Uniformity: a counter is written and read only by its own loop (at one call site) and depends
on nothing but how often that loop ran. When the loop runs in uniform control flow (the
key-tile loop with its ``workgroupBarrier()`` calls), every invocation counts alike, so the
guard's ``break`` is uniform too and the barriers stay legal under WGSL's uniformity analysis
(Tint in Chromium, naga in wgpu-py); the learner's values computed in or after the loop keep
the uniformity they had.

Lines never move: the compiler's messages are shown against the learner's lines, so every
insertion goes inside an existing line -- the module declarations before the first one (after
any ``enable``/``requires``/``diagnostic`` directive), counters after the ``{`` that opens the
entry point's body, a loop's guard after the ``{`` that opens its body, counter parameters
before the ``)`` of a helper's parameter list and of each call. (Columns after an insertion
shift, which is why the page compiles the learner's own text for its messages.)

Budgets (:func:`work_budget`, :func:`loop_weight`): a loop may run as many iterations as it
takes to execute the case's *work budget* of its own body; a light loop over head dims gets
many iterations, a loop whose body holds barriers or calls the register-chunk helpers few.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from nlpcore.kernels import tiling

from .expressions import ShaderError
from .reader import blank_comments

PREFIX = "lab_loop"  # the guard's names: <prefix>_trips, <prefix>_<n>, <prefix>_p<k>

# The work budget (work_budget): terms per (query row, key, head dim of q·k or of p·v)...
TERMS_PER_ELEMENT = 64
# ...counting at least the 64 head dims a lane of the exercise's design holds in registers.
LANE_DIMS = 4 * tiling.CHUNK4
# What a barrier costs, in terms: on SwiftShader one workgroupBarrier() takes about as long
# as 500 terms of arithmetic (measured; see work_budget); rounded up, for a short trip.
BARRIER_TERMS = 1024
BARRIERS = ("workgroupBarrier", "storageBarrier", "textureBarrier", "workgroupUniformLoad")
GUARD_TERMS = 8     # the guard's own count, compare and branch, in every iteration
MIN_BUDGET = 256    # iterations any loop may run: loops over small constants, tiny cases
MAX_COUNTERS = 256  # (loop, call path) pairs; a shader with more is refused, not guarded


@dataclass(frozen=True)
class Loop:
    """One loop of the learner's shader."""
    index: int                # its word in the trips buffer (loops in source order)
    kind: str                 # "for", "while" or "loop"
    line: int                 # 1-based, in the learner's text
    function: str             # the function it is in
    parent: Optional[int]     # the innermost loop around it in that function, if any
    within: Tuple[int, ...]   # every loop around it, also through the calls of its function
    weight: int               # terms one iteration costs (loop_weight)
    budget: int               # iterations per invocation (and call path) before the guard breaks


@dataclass(frozen=True)
class Guarded:
    """A shader with its loops guarded."""
    code: str                 # the instrumented WGSL: the learner's lines, each still in place
    loops: Tuple[Loop, ...]
    work: int                 # the work budget the loop budgets come from
    binding: int              # @group(0) @binding of the trips buffer
    name: str                 # the trips buffer's variable (and the spec's binding name)
    counters: int             # counters declared: one per (loop, call path)

    @property
    def size(self) -> int:
        """Bytes of the trips buffer: one u32 per loop."""
        return 4 * len(self.loops)

    def meta(self) -> dict:
        """What the page needs to read the trips back and point at a loop."""
        return {"name": self.name, "binding": self.binding, "work": self.work,
                "loops": [{"line": l.line, "kind": l.kind, "budget": l.budget, "within": list(l.within)}
                          for l in self.loops]}


def work_budget(n_k: int, d: int, dv: int, br: int, bc: int, invocations: int) -> int:
    """Terms of loop body (see :func:`loop_weight`) one loop may execute per invocation:

        TERMS_PER_ELEMENT · ceil(BR / invocations) · (Nk + BC) · (max(d, 64) + max(dv, 64))

    Why that is generous: a workgroup owns BR query rows (the host dispatches ceil(Nq / BR) ×
    1 × B workgroups) and an invocation's share is ceil(BR / invocations) of them. Each row
    meets every key -- Nk + BC at most, counting a ragged last tile -- over d head dims for its
    score and dv for its output, padded to 64 each in this exercise's register chunks: that is
    all the work there is. A loop that handles one such element per iteration costs at most
    about 16 terms (``s += q_reg[x] * k_tile[c * D + x];`` is 8, its for-header 6), one that
    stages K and V slots about 19 per element (the lab's staging loop: 150 terms for 2 × 4
    elements), so 64 leaves a margin of three to four. Loops over keys or key tiles handle
    whole rows of elements per iteration and get tens of times what they need. Not covered: a
    kernel that leaves invocations idle and has one of them do the work of all their rows.

    Why not more: a tripped loop costs about invocations × work terms. On SwiftShader (headless
    Chromium, 2 cores) a term takes about 0.6 ns per invocation and a barrier about 0.3 µs
    (hence BARRIER_TERMS): an endless loop stops in 0.1 s on the first case of either step and
    in 4 s on the lab's largest (many-workgroups: 1536 invocations, Nk = 384, its key-tile loop
    endless), against 30 s and a GPU process busy for good without the guard.
    """
    for name, value in (("n_k", n_k), ("d", d), ("dv", dv), ("br", br), ("bc", bc),
                        ("invocations", invocations)):
        if not isinstance(value, int) or value <= 0:
            raise ValueError("%s must be a positive int, got %r" % (name, value))
    rows = -(-br // invocations)
    return TERMS_PER_ELEMENT * rows * (n_k + bc) * (max(d, LANE_DIMS) + max(dv, LANE_DIMS))


# ------------------------------------------------------------------------------------------
# Reading functions, loops and calls in comment-blanked text
# ------------------------------------------------------------------------------------------

_FN = re.compile(r"\bfn\s+(\w+)\s*\(")
_LOOP = re.compile(r"(?<![\w.])(for|while|loop)(?!\w)")
_TERM = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*|\d[\w.]*)")
_DIRECTIVES = re.compile(r"\s*(?:(?:enable|requires|diagnostic)\b[^;]*;\s*)*")


def _close(text: str, start: int, opening: str, closing: str) -> int:
    """The index just past the bracket that closes the one at ``start``; len(text) when the
    text ends first (a shader that does not compile: the page shows the compiler's message)."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == opening:
            depth += 1
        elif text[i] == closing:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


@dataclass
class _Fn:
    name: str
    params_close: int         # index of the ")" closing its parameter list
    body: int                 # index of the "{" opening its body
    end: int                  # index past the "}" closing it


@dataclass
class _LoopAt:
    loop_index: int
    kind: str
    start: int                # index of the keyword
    body: int                 # index of the "{" opening its body
    end: int                  # index past the "}" closing it
    function: str
    parent: Optional[int]


@dataclass
class _Call:
    site: int                 # call sites numbered in source order
    callee: str
    at: int                   # index of the callee's name
    close: int                # index of the ")" closing the arguments
    function: str             # the function the call is in


def _functions(text: str) -> Dict[str, _Fn]:
    out = {}
    for m in _FN.finditer(text):
        close = _close(text, m.end() - 1, "(", ")") - 1
        body = text.find("{", close)
        if body >= 0 and m.group(1) not in out:
            out[m.group(1)] = _Fn(m.group(1), close, body, _close(text, body, "{", "}"))
    return out


def _home(functions: Dict[str, _Fn], pos: int) -> Optional[str]:
    return next((f.name for f in functions.values() if f.body < pos < f.end), None)


def _loops(text: str, functions: Dict[str, _Fn]) -> List[_LoopAt]:
    loops: List[_LoopAt] = []
    around: List[_LoopAt] = []  # loops whose body holds the current position
    for m in _LOOP.finditer(text):
        home = _home(functions, m.start())
        at = m.end()
        if m.group(1) == "for":  # a for-header is skipped by its parentheses
            paren = text.find("(", at)
            at = _close(text, paren, "(", ")") if paren >= 0 else len(text)
        body = text.find("{", at)  # a while condition or a loop's attributes hold no braces
        if home is None or body < 0:
            continue  # not inside a function body: not WGSL the compiler will accept
        while around and (around[-1].end <= m.start() or around[-1].function != home):
            around.pop()
        loop = _LoopAt(len(loops), m.group(1), m.start(), body, _close(text, body, "{", "}"), home,
                       around[-1].loop_index if around else None)
        loops.append(loop)
        around.append(loop)
    return loops


def _calls(text: str, functions: Dict[str, _Fn]) -> List[_Call]:
    if not functions:
        return []
    names = "|".join(re.escape(n) for n in sorted(functions, key=len, reverse=True))
    calls = []
    for m in re.finditer(r"(?<![\w.])(%s)\s*\(" % names, text):
        home = _home(functions, m.start())
        if home is not None:
            calls.append(_Call(len(calls), m.group(1), m.start(),
                               _close(text, m.end() - 1, "(", ")") - 1, home))
    return calls


def _free_prefix(text: str) -> str:
    """PREFIX, or PREFIX with a number, such that no identifier of the shader starts with it."""
    prefix, n = PREFIX, 1
    while re.search(r"(?<!\w)" + prefix, text):
        n += 1
        prefix = "%s%d" % (PREFIX, n)
    return prefix


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


# ------------------------------------------------------------------------------------------
# Weights: what one iteration of a loop costs
# ------------------------------------------------------------------------------------------

class _Weights:
    """loop_weight for every loop of one shader (see :func:`loop_weight`)."""

    def __init__(self, text: str, functions: Dict[str, _Fn], loops: List[_LoopAt], calls: List[_Call]):
        self.text, self.functions, self.loops, self.calls = text, functions, loops, calls
        self.straight: Dict[str, int] = {}

    def _region(self, start: int, end: int, function: str) -> int:
        """Terms, barriers and calls in text[start:end] of ``function``, outside the loops nested
        there (each is charged to its own budget)."""
        holes = [(l.start, l.end) for l in self.loops
                 if l.function == function and start <= l.start and l.end <= end and l.start != start]
        inside = lambda pos: any(a <= pos < b for a, b in holes)
        terms = 0
        for m in _TERM.finditer(self.text, start, end):
            if not inside(m.start()):
                terms += BARRIER_TERMS if m.group() in BARRIERS else 1
        for call in self.calls:
            if call.function == function and start <= call.at < end and not inside(call.at):
                terms += self.function_weight(call.callee)
        return terms

    def function_weight(self, name: str) -> int:
        """Terms a call of ``name`` costs outside its loops (and those of the helpers it calls)."""
        if name not in self.straight:
            self.straight[name] = 0  # what a recursive call (not WGSL) would see
            f = self.functions[name]
            self.straight[name] = self._region(f.body, f.end, name)
        return self.straight[name]

    def loop(self, loop: _LoopAt) -> int:
        return GUARD_TERMS + self._region(loop.start, loop.end, loop.function)


def loop_weight(source: str) -> Dict[int, int]:
    """Terms one iteration of each loop costs, by line: identifiers and literals of its header
    and body (loops nested in it excluded: each has its own budget), each barrier counted as
    BARRIER_TERMS, each call of a helper as the helper's own terms (outside its loops), plus
    GUARD_TERMS. It overestimates an iteration whose ``if`` takes one branch (every branch
    counts), so such a loop gets fewer iterations than its work alone would give: the margin
    of :func:`work_budget` covers that."""
    text = blank_comments(source)
    functions = _functions(text)
    loops = _loops(text, functions)
    weights = _Weights(text, functions, loops, _calls(text, functions))
    return {_line_of(text, l.start): weights.loop(l) for l in loops}


# ------------------------------------------------------------------------------------------
# Instrumenting
# ------------------------------------------------------------------------------------------

_instrumented: Dict[tuple, Guarded] = {}


def instrument(source: str, work: int, binding: int) -> Guarded:
    """``source`` with every loop guarded (see the module docstring): loop i may run
    max(MIN_BUDGET, work // weight_i) iterations per invocation; trips are counted in the
    storage buffer at @group(0) @binding(``binding``). Cached: a check's prepare and verify
    instrument the same source.

    Lenient on purpose: text that is not valid WGSL is instrumented as far as its braces allow
    and left for the compiler, which the page runs on the learner's own text first.
    ShaderError when the shader has more than MAX_COUNTERS (loop, call path) pairs."""
    if not isinstance(source, str):
        raise TypeError("source must be a str of WGSL, got %s" % type(source).__name__)
    if not isinstance(work, int) or not 0 < work < 1 << 40:
        raise ValueError("work must be a positive int below 2^40, got %r" % (work,))
    if not isinstance(binding, int) or binding < 0:
        raise ValueError("binding must be a non-negative int, got %r" % (binding,))
    key = (source, work, binding)
    if key not in _instrumented:
        if len(_instrumented) > 16:
            _instrumented.clear()
        _instrumented[key] = _instrument(source, work, binding)
    return _instrumented[key]


def _instrument(source: str, work: int, binding: int) -> Guarded:
    text = blank_comments(source)
    prefix = _free_prefix(text)
    functions = _functions(text)
    found = _loops(text, functions)
    calls = _calls(text, functions)
    weights = _Weights(text, functions, found, calls)
    loops = tuple(Loop(l.loop_index, l.kind, _line_of(text, l.start), l.function, l.parent,
                       _within(l, found, calls), w, min(max(MIN_BUDGET, work // w), (1 << 31) - 1))
                  for l, w in ((l, weights.loop(l)) for l in found))
    name = prefix + "_trips"
    if not loops:
        return Guarded(source, (), work, binding, name, 0)

    # Counters: one per (loop, call path from an entry point). paths[f] lists the paths below
    # function f: (loop index,) for its own loops, (call site, *path) through its calls.
    paths: Dict[str, List[tuple]] = {}

    def paths_of(fn: str, visiting: Tuple[str, ...] = ()) -> List[tuple]:
        if fn not in paths:
            if fn in visiting:
                return []  # recursion: not WGSL
            own = [(l.loop_index,) for l in found if l.function == fn]
            for call in calls:
                if call.function == fn:
                    own += [(call.site,) + p for p in paths_of(call.callee, visiting + (fn,))]
            paths[fn] = own
        return paths[fn]

    called = {c.callee for c in calls if c.callee != c.function}
    roots = [fn for fn in functions if fn not in called]
    total = sum(len(paths_of(fn)) for fn in roots)
    for fn in functions:
        paths_of(fn)
    if total > MAX_COUNTERS:
        raise ShaderError("not run: your shader has %d (loop, call) pairs, more than the %d the "
                          "lab's loop guard counts; call the helpers that hold loops from fewer "
                          "places" % (total, MAX_COUNTERS))

    insertions: Dict[int, List[str]] = {}

    def insert(at: int, piece: str) -> None:
        insertions.setdefault(at, []).append(piece)

    # Each function names its counters: an entry point declares them, a helper takes pointers.
    counter: Dict[Tuple[str, tuple], str] = {}
    serial = 0
    for fn in functions:
        mine = paths[fn]
        if not mine:
            continue
        if fn in roots:
            declared = []
            for p in mine:
                counter[(fn, p)] = "%s_%d" % (prefix, serial)
                declared.append(" var %s_%d: u32 = 0u;" % (prefix, serial))
                serial += 1
            insert(functions[fn].body + 1, "".join(declared))
        else:
            params = []
            for k, p in enumerate(mine):
                counter[(fn, p)] = "(*%s_p%d)" % (prefix, k)
                params.append("%s_p%d: ptr<function, u32>" % (prefix, k))
            insert(functions[fn].params_close, _args(text, functions[fn].params_close, params))
    for call in calls:
        keys = [(call.function, (call.site,) + p) for p in paths.get(call.callee, [])]
        if keys and all(k in counter for k in keys):  # (not so only in recursion: not WGSL)
            insert(call.close, _args(text, call.close, [_address(counter[k]) for k in keys]))
    for l, loop in zip(found, loops):
        if not paths.get(l.function):
            continue
        c = counter[(l.function, (l.loop_index,))]
        insert(l.body + 1, " %(c)s += 1u; if (%(c)s > %(b)du) { if (%(c)s == %(b)du + 1u) { "
                           "atomicAdd(&%(t)s[%(i)d], 1u); } break; }"
               % {"c": c, "b": loop.budget, "t": name, "i": loop.index})
    head = _DIRECTIVES.match(text).end()
    while head > 0 and text[head - 1] in " \t\r\n":
        head -= 1  # just after the last directive's ";", on its line
    declaration = ("@group(0) @binding(%d) var<storage, read_write> %s: array<atomic<u32>, %d>;"
                   % (binding, name, len(loops)))
    insertions.setdefault(head, []).insert(0, declaration + " " if head == 0 else " " + declaration)

    code = source
    for at in sorted(insertions, reverse=True):
        code = code[:at] + "".join(insertions[at]) + code[at:]
    return Guarded(code, loops, work, binding, name, serial)


def _within(loop: _LoopAt, found: List[_LoopAt], calls: List[_Call]) -> Tuple[int, ...]:
    """The loops around ``loop``: in its function, and around every call that leads to it."""
    around = set()
    todo, seen = [(loop.function, loop.start)], set()
    while todo:
        function, at = todo.pop()
        around.update(l.loop_index for l in found if l.function == function and l.start < at < l.end)
        if function not in seen:
            seen.add(function)
            todo.extend((c.function, c.at) for c in calls if c.callee == function)
    return tuple(sorted(around))


def _args(text: str, close: int, args: Sequence[str]) -> str:
    """``args`` to insert before the ")" at ``close``: after a comma unless the list is empty or
    already ends with one (WGSL allows a trailing comma)."""
    before = text[:close].rstrip()
    joined = ", ".join(args)
    return joined if before.endswith(("(", ",")) else ", " + joined


def _address(counter: str) -> str:
    """A counter as a call argument: ``&name`` for a variable, the pointer itself for a parameter."""
    return counter[2:-1] if counter.startswith("(*") else "&" + counter


# ------------------------------------------------------------------------------------------
# Reading the trips back
# ------------------------------------------------------------------------------------------

def trips(guarded: Guarded, raw) -> Tuple[int, ...]:
    """Per loop, how often its guard stopped it (once per invocation and call path), from the
    trips buffer's bytes. ValueError when ``raw`` is not that buffer (missing or of another
    size): a run whose guard cannot be read proves nothing."""
    if raw is None:
        raise ValueError("no %s buffer came back" % guarded.name)
    try:
        data = bytes(raw)
    except (TypeError, ValueError):
        raise ValueError("the %s buffer is %s, not bytes" % (guarded.name, type(raw).__name__)) from None
    if len(data) != guarded.size:
        raise ValueError("the %s buffer has %d bytes, expected %d (one u32 per loop)"
                         % (guarded.name, len(data), guarded.size))
    return tuple(int.from_bytes(data[4 * i:4 * i + 4], "little") for i in range(len(guarded.loops)))


def runaway(loops: Sequence[Loop], counts: Sequence[int]) -> Loop:
    """Of the loops that tripped, the first not inside another that tripped (js/exercises/wgsl.js
    marks the same one in the editor)."""
    tripped = [loop for loop, n in zip(loops, counts) if n]
    ids = {loop.index for loop in tripped}
    return next((l for l in tripped if not ids.intersection(l.within)), tripped[0])


def describe_trips(guarded: Guarded, counts: Sequence[int], invocations: int) -> Optional[str]:
    """The learner's message for a run whose guards tripped (None if none did). It names the
    loop that ran away by its line: the outermost of those that tripped, since an endless
    outer loop keeps entering the loops inside it until they pass their budgets too."""
    tripped = [loop for loop, n in zip(guarded.loops, counts) if n]
    if not tripped:
        return None
    first = runaway(guarded.loops, counts)
    stopped = min(counts[first.index], invocations)
    text = ("stopped: the `%s` loop on line %d ran past %s iterations in %s — does it ever "
            "finish? A correct kernel needs far fewer on this case; the lab stops every loop "
            "at its budget so that the GPU stays usable. Check its condition and what changes "
            "on each pass"
            % (first.kind, first.line, "{:,}".format(first.budget),
               "every invocation" if stopped == invocations
               else "%d of %d invocations" % (stopped, invocations)))
    others = [loop for loop in tripped if loop is not first]
    if others:
        text += " (also stopped: %s)" % ", ".join("the `%s` loop on line %d" % (l.kind, l.line)
                                                  for l in others)
    return text

