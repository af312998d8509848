"""Builders: source folders -> Hugging Face datasets (parquet shards + dataset card), and publishing."""
