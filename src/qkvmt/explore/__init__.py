"""The attention explorer (scripts/explore.py): a local web page over the Python API where a user
types a sentence and clicks through its translation, maps, word links and any head's Q, K and V.

`session` turns requests (plain dicts) into the JSON the page draws, with no server in sight, so
it is tested without a socket; `app` is the Starlette application and its uvicorn server around
it; the page itself is one more page of qkvmt.results.html's template, whose drawing code it shares.
"""
