"""CogCanvas (paper 001): 2-5 persons bound to items in a background; three tasks, six metrics. See README.md."""
