"""Integer WGSL expressions: the values of override defaults, consts and array sizes.

The host needs numbers a shader computes at pipeline-creation time (``array<f32, BR * D>``,
``override BC: u32 = BR / 2u;``); :func:`evaluate` computes them for the small subset such
expressions use: literals, names, + - * / %, parentheses and u32()/i32() conversions.
"""
from __future__ import annotations

import re
from typing import Dict


class ShaderError(ValueError):
    """The shader does not have the interface the host needs; the message says what is wrong."""


_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|\d+)[uif]?|([A-Za-z_]\w*)|(\S))")


def evaluate(expr: str, env: Dict[str, int]) -> int:
    """Value of an integer WGSL expression made of literals, names in ``env``, + - * / % and
    parentheses (u32 arithmetic: / truncates). Raises ShaderError naming what is unknown."""
    tokens = []
    pos = 0
    expr = expr.strip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None or m.end() == pos:
            break
        num, name, sym = m.groups()
        tokens.append(("num", int(num, 0)) if num else ("name", name) if name else ("sym", sym))
        pos = m.end()
    tokens.append(("end", None))
    at = [0]

    def peek():
        return tokens[at[0]]

    def take():
        tok = tokens[at[0]]
        at[0] += 1
        return tok

    def factor():
        kind, val = take()
        if kind == "num":
            return val
        if kind == "name":
            if peek() == ("sym", "("):  # u32(...) / i32(...) conversions
                if val not in ("u32", "i32"):
                    raise ShaderError("cannot evaluate %s(...) in %r" % (val, expr))
                take()
                inner = total()
                if take() != ("sym", ")"):
                    raise ShaderError("unbalanced parentheses in %r" % expr)
                return inner
            if val not in env:
                raise ShaderError("%r in %r has no value the host knows" % (val, expr))
            return env[val]
        if (kind, val) == ("sym", "("):
            inner = total()
            if take() != ("sym", ")"):
                raise ShaderError("unbalanced parentheses in %r" % expr)
            return inner
        if (kind, val) == ("sym", "-"):
            return -factor()
        raise ShaderError("cannot evaluate %r (unexpected %r)" % (expr, val))

    def term():
        value = factor()
        while peek() in (("sym", "*"), ("sym", "/"), ("sym", "%")):
            op = take()[1]
            rhs = factor()
            if op != "*" and rhs == 0:
                raise ShaderError("division by zero in %r" % expr)
            value = value * rhs if op == "*" else (value // rhs if op == "/" else value % rhs)
        return value

    def total():
        value = term()
        while peek() in (("sym", "+"), ("sym", "-")):
            op = take()[1]
            rhs = term()
            value = value + rhs if op == "+" else value - rhs
        return value

    value = total()
    if peek()[0] != "end":
        raise ShaderError("cannot evaluate %r (trailing %r)" % (expr, peek()[1]))
    return value
