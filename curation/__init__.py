"""Curation: turning raw sources into benchmark source folders (dedup, filters, metadata, prompts)."""
