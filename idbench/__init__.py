"""idbench: benchmarks for identity preservation in reference-guided and multi-subject generation."""

__version__ = "0.1.0"
