"""Pages a person reads instead of JSON: reports/index.html for a run (``python -m properties.report``) and
one page per case file (``python -m properties.view``). sources.py (which file feeds each section, read
strictly), sections.py (what each section shows, plain data), index.py (the run's page), case.py (a case
file's page), plots.py (matplotlib figures), page.py (jinja2 templates of templates/, figures beside the
page), screenshot.py (a headless Chromium screenshot, for the tests and the README), records.py (the index of
properties/results/ in its README, generated from the records: ``python -m properties.report.records``), summary.py
(the gate's record as a CI job's Markdown summary: ``python -m properties.report.summary``)."""
