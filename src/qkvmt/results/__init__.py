"""What a user looks at: the typed results of the Python API (one sentence's attention and
alignment, one head's Q, K and V, translations), each showing itself in a notebook and saving
itself, and the pages and figures that draw them (report.html, the alignment and inspector
pages, PNGs), all through one page template (html.py).

A new view of attention, or a new way to draw one, goes here."""
