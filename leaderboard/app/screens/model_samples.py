"""The model page's images: who became whom and the best and worst samples.

Both read a result's per-sample values and evidence (:mod:`idbench.leaderboard.samples`) and the
stored submission's images; a Hub mirror, which publishes numbers only, gets the tables and a line
saying the images are not public. A results file over its bounds is named, never read.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st
from PIL import Image

from idbench.builders.spec import BenchmarkSpec
from idbench.evaluate_pkg import results as result_files
from idbench.evaluate_pkg.data import BenchmarkData, BenchmarkDataError
from idbench.leaderboard import query, samples
from idbench.leaderboard.app.data import benchmark_data, store
from idbench.leaderboard.app.markdown import plain
from idbench.leaderboard.app.widgets import show_table

SAMPLES_PER_SIDE = 3  # best and worst images on the model page
GENERATION_PX, REFERENCE_PX = 256, 128
WORST_ASSIGNMENTS = 6  # images in the model page's "who became whom" (each an expander of up to 5 persons)
FACE_PX = 96  # a reference thumbnail and the generated face crop beside it
UNMATCHED_SHOWN = 8  # crops of the faces no person got (all of them are listed in the table)


def _index_or_first(options: list[str], wanted: str) -> int:
    """``wanted``'s place in ``options``, else 0 (the default ranking metric may be one no row computed)."""
    return options.index(wanted) if wanted in options else 0


def sample_grid(row: dict, spec: BenchmarkSpec) -> None:
    """Best and worst generated images by one metric, each beside its prompt's references (and judge evidence)."""
    s = store()
    submission = s.submission(int(row["submission_id"]))
    computed = [
        m for m in query.available_metrics(pd.DataFrame([row]), spec) if m in row["aggregates"].get("overall", {})
    ]
    if not computed:
        return
    st.subheader("Best and worst samples")
    metric = st.selectbox(
        "by metric",
        computed,
        index=_index_or_first(computed, query.default_metric(pd.DataFrame([row]), spec)),
        key="model-sample-metric",
    )
    try:
        scores = samples.sample_scores(Path(row["results_path"]), metric)
    except result_files.ResultsTooLarge as error:
        st.warning(_too_large(error))
        return
    if scores.empty:
        st.info(f"No per-sample values of {metric} in this result.")
        return
    try:
        data = benchmark_data(submission["data_dir"])
    except BenchmarkDataError as error:
        st.warning(plain(f"The benchmark this was scored against is not available here: {error}"))
        return
    best, worst = samples.extremes(scores, query.metric_specs(spec)[metric].higher_is_better, SAMPLES_PER_SIDE)
    for title, chosen in (("Best", best), ("Worst", worst)):
        if chosen.empty:
            continue
        st.markdown(f"**{title}**")
        for sample in chosen.itertuples():
            _sample_row(data, Path(submission["stored_path"]), Path(row["results_path"]), sample, metric)


def _too_large(error: Exception) -> str:
    """A results file over its bounds, said without the server's path (evaluate_pkg.results_bounds)."""
    return plain("Not shown: this result's file is too large to read here (" + str(error).split(": ", 1)[-1] + ").")


WHO_NOT_RECORDED = (
    "Who became whom was not recorded for this result: it was scored before suite 0.3, or without the identity metrics."
)


def who_became_whom(row: dict, spec: BenchmarkSpec) -> None:
    """Swaps, clones, misses and extras per image by group size (from the aggregates), then the worst
    images' face assignments: each person's reference beside the generated face it was matched to."""
    st.subheader("Who became whom")
    summary = query.who_summary(row["aggregates"], spec)
    if summary.empty:
        st.text(WHO_NOT_RECORDED)
        return
    show_table(summary.round(3).reset_index(), hide_index=True, key="model-who-summary")
    st.caption(
        "Mean count per image, by the number of persons N the prompt asks for. "
        + " ".join(f"{name.capitalize()}: {text}." for name, text in query.WHO_COUNTS.items())
    )
    submission = store().submission(int(row["submission_id"]))
    stored = Path(submission["stored_path"])
    if not stored.is_dir():  # a Hub mirror: the public results repos hold numbers, never images
        st.text("The generated images of this result are not public here, so its faces are not shown.")
        return
    try:
        records = samples.evidence_of(Path(row["results_path"]), samples.WHO_BECAME_WHOM)
        strict = samples.sample_scores(Path(row["results_path"]), query.WHO_GROUNDED_METRIC)
    except result_files.ResultsTooLarge as error:
        st.warning(_too_large(error))
        return
    if not records:
        st.text("This result kept no per-image record of who became whom (its evidence file is absent).")
        return
    try:
        data = benchmark_data(submission["data_dir"])
    except BenchmarkDataError as error:
        st.warning(plain(f"The benchmark this was scored against is not available here: {error}"))
        return
    worst = samples.worst_assignments(records, strict, WORST_ASSIGNMENTS)
    st.markdown(
        f"**The {len(worst)} image(s) where identities went most wrong** "
        f"(swaps + clones + misses + extras, then lowest {query.WHO_GROUNDED_METRIC})"
    )
    for image in worst.itertuples():
        _assignment(data, stored, image, records[(image.prompt_id, image.seed)])


def _assignment(data: BenchmarkData, stored: Path, image, record: dict) -> None:
    """One image's assignment in an expander: per person its reference, its matched face and the verdict;
    then the faces no person got."""
    prompt = data.prompt_rows[image.prompt_id]
    references = {p["slot"]: p["ref_id"] for p in prompt["persons"]}
    strict = "n/a" if np.isnan(image.id_sim_strict) else f"{image.id_sim_strict:.3f}"
    counts = ", ".join(f"{getattr(image, name)} {name}" for name in samples.WHO_ERRORS)
    with st.expander(plain(f"{image.prompt_id} seed {image.seed}: {counts}; {query.WHO_GROUNDED_METRIC} {strict}")):
        st.text(prompt.get("prompt", ""))
        table = samples.identity_table(record, references)
        generated = None
        try:
            generated = Image.open(samples.generation_file(stored, image.prompt_id, image.seed)).convert("RGB")
        except (KeyError, OSError):  # the stored folder lost the file: show the numbers without the faces
            st.text("The generated image is not in the stored submission.")
        for person in table.itertuples():
            reference, face, text = st.columns([1, 1, 3])
            reference.image(
                data.references[person.reference]["image"], caption=f"reference {person.slot}", width=FACE_PX
            )
            if generated is not None and person.box is not None:
                face.image(samples.face_crop(generated, person.box), caption=f"face {person.face}", width=FACE_PX)
            else:
                face.text("no face")
            text.text(
                f"{person.slot}: {person.verdict}\ncosine {_number(person.cosine)}, margin {_number(person.margin)}"
            )
        show_table(table, hide_index=True)
        others = samples.unmatched_faces(record)
        if not record.get("faces"):
            st.text("No face was found in the generated image.")
        elif others.empty:
            st.text("Every generated face was matched to a person.")
        else:
            st.text(f"Faces matched to no person ({len(others)}; extra beyond N: {record['counts'].get('extra', 0)}):")
            show_table(others, hide_index=True)
            if generated is not None:  # a crowd can hold dozens of faces: a row of the first few
                shown = others.head(UNMATCHED_SHOWN)
                for column, other in zip(st.columns(len(shown)), shown.itertuples()):
                    caption = f"face {other.face}" + (f", repeats {other.repeats}" if other.repeats else "")
                    column.image(samples.face_crop(generated, other.box), caption=caption, width=FACE_PX)


def _number(value: float) -> str:
    return "n/a" if value is None or np.isnan(value) else f"{value:.3f}"


def _sample_row(data: BenchmarkData, stored: Path, result_dir: Path, sample, metric: str) -> None:
    prompt = data.prompt_rows[sample.prompt_id]
    refs = samples.reference_ids(data, sample.prompt_id)
    # Fixed widths: the generation larger than its references, whatever the images' own sizes.
    columns = st.columns([2] + [1] * max(len(refs), 1))
    columns[0].image(
        str(samples.generation_file(stored, sample.prompt_id, sample.seed)),
        caption=f"generated (seed {sample.seed})",
        width=GENERATION_PX,
    )
    for column, ref in zip(columns[1:], refs):
        column.image(data.references[ref]["image"], caption=f"reference {ref}", width=REFERENCE_PX)
    st.text(f"{sample.prompt_id} seed {sample.seed}: {metric} = {sample.value:.4f}\n{prompt.get('prompt', '')}")
    try:
        found = samples.evidence(result_dir, sample.prompt_id, sample.seed)
    except result_files.ResultsTooLarge as error:
        found = {}
        st.caption(_too_large(error))
    if found:
        with st.expander("judge evidence"):
            st.json(found)
