"""Benchmarks: each writes a JSON record under benchmarks/ that render_markdown turns into BENCHMARKS.md."""
