"""qkvmt serve: a JSON translation server over a model's own `translate` (qkvmt.Model, or the
CTranslate2 engine `qkvmt translate engine=ctranslate2` runs).

`batcher` owns the model in one worker thread and translates the sentences of every request
waiting in one call; `requests` checks a request's body against the server's limits; `app` is the
Starlette application around them, guarded and served as the explorer is (qkvmt.web)."""
