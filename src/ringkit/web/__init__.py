"""The simulator page and its JSON API (``ringkit serve``).

The page (``static/``: HTML, JavaScript and SVG, no build step) draws what the API returns and
computes nothing itself; the API parses and validates its query parameters (:mod:`.params`), then
asks the library (:mod:`.api`), so what the page shows is what the library does. Only
:mod:`.app` needs the ``web`` extra (Starlette); the other modules are plain Python.

>>> from ringkit.web.api import lookup_report
>>> from ringkit.web.params import parse_lookup_query
>>> lookup_report(parse_lookup_query({"key": "booking-0001"}))["owner"] in {"A", "B", "C"}
True
"""
