"""The Model's work over many sentences: two models' symmetrized links (two_way), a corpus's links
streamed (corpus), every extraction scored against gold links (aer), a test set scored
(evaluation); and the studies, one package each, none importing another: each head masked
(heads/), every signal's faithfulness (faithfulness/), keys and values (kv/), what each layer
already knows (lens/), where cross-attention's mass goes (sinks/). A study's package holds its
computation, its corpus loop, its result and its table in the record; what they share is below
them (qkvmt.analysis, qkvmt.results) or beside them here (checks, model_protocol, recorded).

Each function here takes a model as qkvmt.Model is (model_protocol.ModelLike) and returns a result of
qkvmt.results; qkvmt.Model reaches them through its methods (methods.StudyMethods), and the
commands (qkvmt.pipeline) reach them only through qkvmt.Model. A new analysis of a corpus goes
here, with a method in methods.py."""
