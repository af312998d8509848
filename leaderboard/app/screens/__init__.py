"""The leaderboard app's pages, one module each: ``overview``, ``benchmark`` (every benchmark's
leaderboard), ``model`` (with ``model_samples``, its images), ``submit``, ``status`` and ``about``.

The scripts under ``views/`` that the navigation runs call into these. This folder is not called
``pages``: Streamlit treats a ``pages/`` folder beside the entry script as an old-style multipage app
and then runs its files as pages instead of ``main.py``'s navigation. What several pages share is in
:mod:`~idbench.leaderboard.app.data` (the store and cached loaders),
:mod:`~idbench.leaderboard.app.widgets` (links, units, tables) and :mod:`~idbench.leaderboard.app.charts`.

One rule holds on every page: text that came from a submitter (a model name, family, link, metadata,
a failure reason) reaches the screen only as a table cell (``st.dataframe``), ``st.text``, ``st.json``
or an alert or caption of :func:`~idbench.leaderboard.app.markdown.plain`-escaped text; never as
Markdown or HTML, where a link or an image would render.
"""
