"""Checkpoint layout, idempotent Delta commits and the commit ledger."""
