"""Cross-GPU regression tracker for CUDA GEMM kernels.

Data flows one way: kernels/*.cu -> catalogue -> build -> problem -> verify -> measure -> record -> asv.
"""

__version__ = "0.1.0"
