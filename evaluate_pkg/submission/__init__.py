"""Submissions: the skeleton a user fills in, and the validation that stands between it and scoring.

A submission maps every (prompt_id, seed) the benchmark asks for to one generated image, and says so
explicitly: images are never paired with prompts by the order of their file names. It is one of

- a folder with ``submission.json`` and ``manifest.csv`` (``prompt_id,seed,file``), the images anywhere
  inside it: what ``idbench template`` writes (:mod:`.folder`);
- a folder with ``submission.json`` and ``*.parquet`` files holding ``prompt_id``, ``seed`` and
  ``image`` (:mod:`.parquet`; ``datasets``' ``to_parquet`` writes them);
- a ``.zip`` of either, or of a ranking (:mod:`.archive`);
- for the retrieval task, ``submission.json`` with ``"task": "retrieval"`` and ``rankings.csv``
  (``prompt_id,slot,rank,ref_id``) instead of images (:mod:`.rankings`, docs/cogcanvas-tasks.md).

``submission.json`` holds the benchmark and the model's name, both required, and optional details
(:mod:`.metadata`). :func:`write_template` writes the empty skeleton (:mod:`.template`);
:func:`validate_submission` checks everything up front and either returns a :class:`Submission` (one
:class:`Entry` per required pair, in the benchmark's order) or raises one :class:`SubmissionError`
listing every :class:`Problem` found (:mod:`.problems`), so an invalid submission scores nothing.
Every bound that keeps a hostile submission from costing time, memory or disk, and the order in
which they are checked: docs/hostile-input.md. Example::

    write_template(data, Path("my-submission"))
    # ... put each image where its manifest row says, fill in submission.json ...
    with validate_submission(Path("my-submission"), data) as submission:
        for entry in submission.entries:
            image = entry.load()  # 8-bit RGB, upright
"""

from idbench.evaluate_pkg.images import MAX_IMAGE_BYTES, MAX_PIXELS

from .archive import (
    ARCHIVE_SUFFIXES,
    COMPRESSION_RATIO_ENV,
    IMAGE_SUFFIXES,
    MAX_COMPRESSION_RATIO,
    MAX_ZIP_BYTES,
    MAX_ZIP_MEMBERS,
    RATIO_FLOOR_BYTES,
    UNPACKED_BYTES_ENV,
    ZIP_MEMBERS_ENV,
    ZipLimits,
)
from .decode import DECODE_WORKERS, MAX_PIXELS_IN_FLIGHT
from .folder import MANIFEST_COLUMNS, MANIFEST_NAME, check_resume_folder
from .metadata import (
    MAX_JSON_DEPTH,
    MAX_METADATA_BYTES,
    MAX_TEXT_CHARS,
    METADATA_FIELDS,
    METADATA_NAME,
    REQUIRED_METADATA,
    json_depth,
    metadata_text_problems,
)
from .parquet import (
    MAX_PAGE_BYTES,
    MAX_ROW_GROUP_BYTES,
    PAGE_OVERHEAD_BYTES,
    PARQUET_BUFFER_BYTES,
    PARQUET_COLUMNS,
)
from .problems import (
    MAX_MEMBER_NAME_BYTES,
    MAX_NAME_COMPONENT_BYTES,
    MAX_PROBLEMS,
    SHOWN_NAME_CHARS,
    Problem,
    SubmissionError,
)
from .rankings import RANKING_COLUMNS, RANKINGS_NAME
from .shared import LISTING_ROWS_FACTOR, MAX_CSV_FIELD_CHARS, MAX_MANIFEST_BYTES, max_listing_rows
from .template import expected_file, template_metadata, write_template
from .validate import Entry, Submission, validate_submission

__all__ = [
    "ARCHIVE_SUFFIXES",
    "COMPRESSION_RATIO_ENV",
    "DECODE_WORKERS",
    "IMAGE_SUFFIXES",
    "LISTING_ROWS_FACTOR",
    "MANIFEST_COLUMNS",
    "MANIFEST_NAME",
    "MAX_COMPRESSION_RATIO",
    "MAX_CSV_FIELD_CHARS",
    "MAX_IMAGE_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_MANIFEST_BYTES",
    "MAX_MEMBER_NAME_BYTES",
    "MAX_METADATA_BYTES",
    "MAX_NAME_COMPONENT_BYTES",
    "MAX_PAGE_BYTES",
    "MAX_PIXELS",
    "MAX_PIXELS_IN_FLIGHT",
    "MAX_PROBLEMS",
    "MAX_ROW_GROUP_BYTES",
    "MAX_TEXT_CHARS",
    "MAX_ZIP_BYTES",
    "MAX_ZIP_MEMBERS",
    "METADATA_FIELDS",
    "METADATA_NAME",
    "PAGE_OVERHEAD_BYTES",
    "PARQUET_BUFFER_BYTES",
    "PARQUET_COLUMNS",
    "RANKINGS_NAME",
    "RANKING_COLUMNS",
    "RATIO_FLOOR_BYTES",
    "REQUIRED_METADATA",
    "SHOWN_NAME_CHARS",
    "UNPACKED_BYTES_ENV",
    "ZIP_MEMBERS_ENV",
    "Entry",
    "Problem",
    "Submission",
    "SubmissionError",
    "ZipLimits",
    "check_resume_folder",
    "expected_file",
    "json_depth",
    "max_listing_rows",
    "metadata_text_problems",
    "template_metadata",
    "validate_submission",
    "write_template",
]
