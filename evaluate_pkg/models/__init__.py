"""Model registry, profiles and one loader module per model family (see base.py for the contract)."""
