"""The record of measured runs (docs/runs.json) behind every figure the README and docs/results.md
show, and the tables generated from it: a run is read from its folder and added (from_folder),
runs of one recipe on one class of hardware are summarized by mean, range and count (summary),
drawn as Markdown tables (tables) and written between marker lines of a page (pages).

A new table is a function in tables.py named in its TABLES; a new field of a run is checked in
record_file.py."""
