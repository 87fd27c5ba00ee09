"""The REST toolkit both admin servers share: the cluster's (``broker/admin``) and the
gateway's (``gateway/admin_app.py``). Each owns its route table and handlers; this package
owns what every route of either goes through, so that both behave the same:

- ``routes``: :class:`Route`, one row of a route table;
- ``tokens`` and ``auth``: bearer tokens, roles, 401 / 403;
- ``access``: who may reach the server at all (allowed ``Host`` values, same-origin
  requests only, a JSON content type on every POST), and whether it may start open;
- ``json_io``: request bodies (size, media type, duplicate keys) and JSON answers;
- ``middleware``: the app's one middleware: access checks, errors as JSON
  ``{"reason": ...}``, an access log that cannot be forged, metrics;
- ``openapi``: the OpenAPI 3.1 document built from a route table;
- ``errors``: the errors a request is refused with, each with its HTTP status.
"""
