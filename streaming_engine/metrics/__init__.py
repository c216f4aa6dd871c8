"""Prometheus metrics, fed by the runtime's lifecycle events."""
