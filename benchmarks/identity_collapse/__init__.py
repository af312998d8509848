"""Identity Collapse (paper 002): 2-10 subjects per prompt; DINOv2 similarity and the Subject Collapse Rate. See README.md."""
