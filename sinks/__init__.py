"""Built-in sink plugins (one module per plugin; modules starting with "_" are helpers)."""
