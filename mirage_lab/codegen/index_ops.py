"""Integer division and remainder by powers of two in generated kernels, as shifts and masks.

The emitters write tile offsets the way they read: ``(e // 16) * 20 + e % 16``. Numba compiles
``//`` and ``%`` on signed 64-bit integers with Python's floor semantics, a sign fix-up per
operation that LLVM keeps wherever it cannot prove the operand non-negative; the GQA kernel's
prologue spent about 1,100 instructions per warp on such arithmetic (SASS: 116 ISETP, 100 SEL).
For a power of two, ``x // 2**k == x >> k`` and ``x % 2**k == x & (2**k - 1)`` hold for every
integer in Python and in two's-complement int64 alike (``>>`` on a signed integer is an
arithmetic shift), so the rewrite changes no value, only the instructions.
"""
from __future__ import annotations

import ast
from functools import lru_cache

__all__ = ["shift_pow2"]


class _Pow2(ast.NodeTransformer):
    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        c = node.right
        if not (isinstance(c, ast.Constant) and type(c.value) is int and c.value > 0 and c.value & (c.value - 1) == 0):
            return node
        if isinstance(node.op, ast.FloorDiv):
            k = c.value.bit_length() - 1
            return node.left if k == 0 else ast.BinOp(node.left, ast.RShift(), ast.Constant(k))
        if isinstance(node.op, ast.Mod):
            return ast.BinOp(node.left, ast.BitAnd(), ast.Constant(c.value - 1))
        return node


@lru_cache(maxsize=1 << 16)  # the tuner generates many variants of one kernel: most lines recur
def _rewrite(line: str) -> str:
    body = line.strip()
    indent = line[: len(line) - len(line.lstrip())]
    header = body.endswith(":")
    try:
        tree = ast.parse(body + " pass" if header else body)
    except SyntaxError:
        return line
    tree = _Pow2().visit(tree)
    if header:  # ``if e % 4 < 2:`` parsed with a ``pass`` body: keep the header
        return indent + ast.unparse(tree).split("\n")[0]
    return indent + "; ".join(ast.unparse(st) for st in tree.body)


def shift_pow2(text: str) -> str:
    """``text`` (a kernel's source) with ``// 2**k`` and ``% 2**k`` of integers as ``>> k`` and ``& (2**k - 1)``.

    Lines in docstrings and lines with a comment are left as they are.

    >>> print(shift_pow2("    x = (tid * 8) // 16 * 20 + (tid * 8) % 16"))
        x = (tid * 8 >> 4) * 20 + (tid * 8 & 15)
    """
    out, in_doc = [], False
    for line in text.split("\n"):
        quotes = line.count('"""')
        if in_doc or quotes or "#" in line or ("//" not in line and "%" not in line):
            out.append(line)
        else:
            out.append(_rewrite(line))
        if quotes % 2:
            in_doc = not in_doc
    return "\n".join(out)
