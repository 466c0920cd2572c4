"""Reading the guided lab's steps from their statement files, ``steps/NN-<id>.md``.

A statement file is a header of ``key: value`` lines, a blank line, then the step's text in
Markdown (what to do), a ``## Question`` section and, for a choice, a ``## Choices`` section::

    id: predict-agree        the step's id (the page and progress use it)
    kind: Predict            Predict | Run | Measure | Explain
    title: ...
    minutes: 3
    answer: choice           choice | integer | number
    right: 2                 a choice's right answer, numbered as listed (omitted when the
                             truth is computed at check time)
    unit: bytes              optional, shown beside the answer box; also placeholder
    needs: compare           optional: compare | timing (what the page must observe first)
    timing: yes              optional: the step carries the timing panel
    checker: choice          the name of its checker in checkers.CHECKERS
    hides: compare plan      optional, for a prediction: the page results it hides until the
                             prediction is submitted (compare: the comparison's verdict and
                             table; plan: the tile-plan panel's values)
    when: d = 1024           optional: hide them only when the shown run used these inputs

    Text with {NAME} fields from settings.fields() ...

    ## Question

    ...

    ## Choices

    1. A choice's text.
       Why not: shown when this wrong choice is picked.

Lines of one paragraph are joined with single spaces; paragraphs are kept apart.
"""
from __future__ import annotations

import pathlib
import re

from . import settings

STEPS_DIR = pathlib.Path(__file__).resolve().parent / "steps"
_HEADER = re.compile(r"^([a-z]+): (.*)$")
_CHOICE = re.compile(r"^(\d+)\. (.*)$")
_WHY = "Why not: "


def _paragraphs(lines: list) -> str:
    text = "\n".join(line.strip() for line in lines).strip()
    return "\n\n".join(" ".join(p.split("\n")) for p in re.split(r"\n\s*\n", text) if p.strip())


def _choices(lines: list, path) -> list:
    """[{text, why}] from the numbered items of a ``## Choices`` section."""
    items = []
    for line in lines:
        number = _CHOICE.match(line)
        if number:
            if int(number.group(1)) != len(items) + 1:
                raise ValueError("%s: choice %s is out of order" % (path.name, number.group(1)))
            items.append({"text": [number.group(2)], "why": None})
        elif line.strip().startswith(_WHY):
            items[-1]["why"] = [line.strip()[len(_WHY):]]
        elif line.strip():
            part = "why" if items[-1]["why"] is not None else "text"
            items[-1][part].append(line.strip())
    return [{"text": " ".join(c["text"]), "why": None if c["why"] is None else " ".join(c["why"])}
            for c in items]


def read(path: pathlib.Path) -> dict:
    """One step as the plain dict the page and the checkers use (the answer's fields nested)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    head = {}
    while lines and lines[0].strip():
        match = _HEADER.match(lines.pop(0))
        if not match:
            raise ValueError("%s: a header line must read 'key: value'" % path.name)
        head[match.group(1)] = match.group(2).strip()
    sections = {"do": []}
    current = "do"
    for line in lines:
        if line.startswith("## "):
            current = line[3:].strip().lower()
            sections[current] = []
        else:
            sections[current].append(line)
    values = settings.fields()
    step = {"id": head["id"], "kind": head["kind"], "title": head["title"],
            "minutes": int(head["minutes"]),
            "do": _paragraphs(sections["do"]).format(**values),
            "question": _paragraphs(sections["question"]).format(**values)}
    answer = {"kind": head["answer"]}
    for key in ("placeholder", "unit"):
        if key in head:
            answer[key] = head[key]
    if "choices" in sections:
        answer["choices"] = [{"text": c["text"].format(**values),
                              "why": None if c["why"] is None else c["why"].format(**values)}
                             for c in _choices(sections["choices"], path)]
    if "right" in head:
        answer["right"] = int(head["right"]) - 1
    step["answer"] = answer
    if "needs" in head:
        step["needs"] = head["needs"]
    if head.get("timing") == "yes":
        step["timing"] = {"sizes": list(settings.TIMING_SIZES), "d": settings.TIMING_D}
    step["checker"] = head["checker"]
    if "hides" in head:
        step["hides"] = {"targets": head["hides"].split(), "when": _when(head.get("when"), values, path)}
    return step


def _when(text, values: dict, path) -> dict:
    """``d = {REFUSE_D}`` -> {"d": 1024}: the inputs of the run whose results a prediction hides."""
    when = {}
    for part in (text or "").format(**values).split(","):
        if not part.strip():
            continue
        name, _, number = part.partition("=")
        if not number.strip().isdigit():
            raise ValueError("%s: 'when' reads 'name = integer, ...', got %r" % (path.name, text))
        when[name.strip()] = int(number)
    return when


def read_all() -> tuple:
    """Every step, in the order of the files' numbers."""
    return tuple(read(path) for path in sorted(STEPS_DIR.glob("[0-9][0-9]-*.md")))
