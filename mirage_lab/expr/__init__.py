"""Abstract expressions (MIRAGE_SPEC §3) and the z3 subexpression oracle that prunes the search.

    >>> import mirage_lab as mi
    >>> from mirage_lab import examples
    >>> g = examples.rms_norm_linear_program(16, 4096, 4096)
    >>> t = mi.expr.abstract(g.outputs[0])
    >>> str(t)
    'sum(4096, mul(div(x0, rms(4096, x0)), x1))'
    >>> x, w = mi.expr.var(0), mi.expr.var(1)
    >>> mi.expr.is_subexpression(mi.expr.red(128, mi.expr.mul(x, w)), t)
    True
"""
from .abstract import abstract, abstract_block_graph, abstract_graph, for_block_op, for_kernel_op
from .oracle import SubexprOracle, degree, is_subexpression
from .terms import (Expr, ExprError, add, clamp, concat, div, exp, gelu, mul, neg, pow_, red, relu, rms, scale,
                    sigmoid, silu, sqrt, square, var)

__all__ = ["Expr", "ExprError", "abstract", "abstract_graph", "abstract_block_graph", "for_kernel_op", "for_block_op",
           "SubexprOracle", "is_subexpression", "degree", "var", "add", "mul", "div", "pow_", "neg", "exp", "square",
           "sqrt", "silu", "gelu", "relu", "sigmoid", "clamp", "rms", "red", "concat", "scale"]
