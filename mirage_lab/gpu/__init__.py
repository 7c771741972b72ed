"""What every GPU user of the package shares, below every stage: the one door to numba-cuda.

    >>> from mirage_lab.gpu.numba_compat import cuda, gpu_available
"""
