"""A checkpointed pipeline engine on Spark Structured Streaming (see ARCHITECTURE.md)."""

__version__ = "0.1.0"
