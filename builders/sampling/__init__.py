"""Deterministic samplers that turn a validated source pool into prompts (pure functions, no I/O)."""
