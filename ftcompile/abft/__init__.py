"""ABFT numerics: checksums, V-ABFT thresholds, fault injection and the reference algorithms."""
from .injection import FaultSpec, inject
from .thresholds import aabft_threshold, e_max, vabft_threshold

__all__ = ["FaultSpec", "inject", "vabft_threshold", "aabft_threshold", "e_max"]
