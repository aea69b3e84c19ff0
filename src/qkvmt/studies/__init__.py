"""The Model's work over many sentences: two models' symmetrized links (two_way), a corpus's links
streamed (corpus), every extraction scored against gold links (aer), each head masked (heads),
every signal's faithfulness (faithfulness), and the studies of keys and values (kv) and of each
encoder depth (depths).

Each function here takes a model as qkvmt.Model is (model_like.ModelLike) and returns a result of
qkvmt.views; qkvmt.Model reaches them through its methods (methods.StudyMethods), and the
commands (qkvmt.pipeline) reach them only through qkvmt.Model. A new analysis of a corpus goes
here, with a method in methods.py."""
