"""Spark runtime: the session, the row envelope, one streaming query per
pipeline (``pipeline.py``: the single place epochs commit), transform chains,
the runner with its restart strategy, lifecycle events and fault injection."""
