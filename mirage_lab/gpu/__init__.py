"""The GPU toolchain's lowest layer: the one place numba is imported from.

:mod:`.numba_compat` imports nothing else of mirage_lab, so every GPU user (verify's
CUDA backend, the search's device arrays, codegen, runtime, benchmarks) can import it
without pulling in a higher layer. Importing this package does not import numba.
"""
