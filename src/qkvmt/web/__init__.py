"""What qkvmt's HTTP servers share (the explorer, qkvmt.explore; the translation server,
qkvmt.serve): `guard` (who is answered: the Host, the token off loopback, the Origin) and
`json_api` (JSON bodies read within limits, one-line JSON errors, the listening socket and the
uvicorn server around a Starlette application) and `protocol` (uvicorn's HTTP/1.1 as they run it:
JSON errors for what it cannot read, a connection closed when its request head stalls)."""
