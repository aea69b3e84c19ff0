"""What each layer already knows: the logit lens and DecoderLens on one sentence (passes) as a
result (result, `Model.lens`), DecoderLens over a corpus (corpus) as a result with its table and
figure (study, `Model.lens_study`), and the record's table of the measured runs (table)."""
