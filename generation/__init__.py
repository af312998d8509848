"""Generation: from a built benchmark to a submission, through a model adapter (docs/generation.md).

- :mod:`~idbench.generation.requests`: one :class:`GenerationRequest` per (prompt_id, seed) of the
  benchmark's template: the prompt text, the reference images in a documented order with their roles,
  the seed, the resolution and the task;
- :mod:`~idbench.generation.adapters`: the adapter protocol, the registry (built-in names, the
  ``idbench.generators`` entry point group, ``module:attr``) and the built-in diffusers adapters;
- :mod:`~idbench.generation.run`: the resumable run that writes the images and ``submission.json``
  with its generation record.
"""
