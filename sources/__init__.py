"""Built-in source plugins (one module per plugin; modules starting with "_" are helpers)."""
