"""Built-in transform plugins (one module per plugin; modules starting with "_" are helpers)."""
