"""brrrtui: see where a PyTorch script's GPU time goes — compute, memory bandwidth or overhead — line by line."""

__version__ = "0.1.0"
