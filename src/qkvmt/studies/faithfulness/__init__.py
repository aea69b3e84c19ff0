"""How faithful each signal is: deleting the source tokens it ranks highest, or keeping only them,
and what that does to the target token (curves), over a corpus (corpus), as a result that shows and
saves itself (result), and the record's table of the measured runs (table)."""
