"""CHARIS (paper 000): single-subject identity preservation judged by a VLM through the EKB. See README.md."""
