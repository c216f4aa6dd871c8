"""Spark runtime: session construction and (later) the pipeline runner."""
