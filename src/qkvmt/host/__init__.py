"""Facts of the machine a command runs on, read by training, serving, the benchmark and the studies
alike: hardware (what it computes natively, and the precision that follows), machine (what a run or
study records of it) and process_memory (a resident set, how freed memory is kept).

A new fact of the host goes here; nothing here imports the rest of qkvmt."""
