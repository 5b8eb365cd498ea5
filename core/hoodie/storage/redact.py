"""Table URIs as they may be shown to people: credentials written inside a URI replaced by ``***``.

An operator may write credentials into a table's URI (``s3://KEY:SECRET@bucket/t``, an Azure SAS token as
``abfss://c@a.dfs.core.windows.net/t?sv=...&sig=...``). Whatever shows a URI to someone other than the owner
of the configuration (``/status``, the API, the status page, log lines) shows :func:`redact_uri` of it: a
page or a log is read by more people, and kept longer, than the secret was meant for. What opens the table
keeps the URI as written; only its display is redacted.

The rule, for a URI with a scheme (``scheme://...``; a plain path has no credentials and is shown as is):

- **User information** (before the authority's last ``@``) is replaced whole, ``s3://***@bucket/t``: the
  access key's id is shown as ``***`` too, as :func:`hoodie.storage.backend.is_secret` has it for the
  storage options. A secret written with a raw ``/`` (AWS's secret keys hold them; a URI should escape it,
  an operator may not) still counts as user information: ``s3://KEY:SE/CRET@bucket/t`` is
  ``s3://***@bucket/t``, not a host ``KEY:SE`` (a ``:`` followed by digits alone is a port, as in
  ``hdfs://namenode:8020/a@b``). One exception: Azure's ``abfs[s]``/``wasb[s]`` URIs name the container there
  (``abfss://container@account.dfs.core.windows.net``); a container without a ``:`` after it is a name, not a
  secret, and stays.
- **Every query value** is replaced, its name kept (``?sv=***&sig=***``): a table URI's query means nothing to
  hoodie and is there only to carry a signature or a token; which parameters of which store are secret is
  not ours to guess. A **fragment** is replaced too.

:func:`redact_uris` applies the rule to every URI inside a text (an error message, a log line); it is what
the daemon's log handler runs on each record (:class:`RedactUris`), and :func:`redact_json` on every string
of a status before it is served (:func:`dumps_redacted`). All are idempotent.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any, Final

#: Schemes whose user information is an Azure container's name (``container@account.<endpoint>``).
CONTAINER_SCHEMES: Final = frozenset({"abfs", "abfss", "wasb", "wasbs"})
#: What replaces a secret.
MASK: Final = "***"

#: A URI inside a text: a scheme, ``://``, then anything up to white space, a quote or an angle bracket
#: (which a URI cannot hold unescaped, and which end it in messages: ``'s3://...'``, ``"..."``, ``<...>``).
_URI_IN_TEXT: Final = re.compile(r"""[A-Za-z][A-Za-z0-9+.\-]*://[^\s'"<>`]*""")
#: Values :func:`redact_json` returns as they are.
_SCALARS: Final = frozenset({type(None), bool, int, float})
#: In a JSON text: ``://`` then, inside the same string (escapes skipped), the start of user information, a
#: query or a fragment.
_MAYBE_SECRET: Final = re.compile(r'://(?:[^"\\]|\\.)*?[@?#]')
#: A string that is a URI and nothing else.
_ONE_URI: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://\S*")
#: User information whose secret holds a raw ``/`` (``KEY:SE/CRET@bucket/t``): a ``:`` in the first segment
#: that does not start a port, then everything up to the next ``@``.
_RAW_USERINFO: Final = re.compile(r"[^/@:]*:(?![0-9]*(?:/|$))[^@]*@(?P<rest>.*)", re.DOTALL)


def redact_uri(uri: str) -> str:
    """``uri`` with its credentials replaced by ``***`` (the rule: the module docstring); anything without
    ``://`` (a local path) unchanged."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return uri
    rest, hash_sign, fragment = rest.partition("#")
    rest, question_mark, query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if at:
        if ":" in userinfo or scheme.lower() not in CONTAINER_SCHEMES:
            authority = f"{MASK}@{host}"
    elif raw := _RAW_USERINFO.match(rest):
        host, slash, path = raw.group("rest").partition("/")
        authority = f"{MASK}@{host}"
    out = f"{scheme}://{authority}{slash}{path}"
    if question_mark:
        out += "?" + "&".join(_mask_parameter(p) for p in query.split("&"))
    if hash_sign:
        out += "#" + (MASK if fragment else "")
    return out


def redact_uris(text: str) -> str:
    """``text`` with every URI in it passed through :func:`redact_uri`. A text that is one URI (a table's
    ``uri``) is redacted whole: a quote inside it ends nothing."""
    if "://" not in text:  # the common case, at the cost of one scan
        return text
    if _ONE_URI.fullmatch(text):
        return redact_uri(text)
    return _URI_IN_TEXT.sub(lambda m: redact_uri(m.group(0)), text)


def redact_json(value: object) -> object:
    """A JSON-like value (mappings, lists, tuples, strings, numbers) with :func:`redact_uris` applied to every
    string in it, mapping keys included. Anything else becomes its redacted ``str``, as ``json.dumps(...,
    default=str)`` would show it. Redacting the values, not the JSON text, keeps its escapes whole."""
    if type(value) in _SCALARS:
        return value
    if isinstance(value, str):
        return redact_uris(value)
    if isinstance(value, Mapping):
        return {redact_json(k) if isinstance(k, str) else k: redact_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json(v) for v in value]
    if isinstance(value, bool | int | float):
        return value
    return redact_uris(str(value))


def dumps_redacted(value: object, **options: Any) -> str:
    """``json.dumps(value, default=str, **options)`` of :func:`redact_json` of ``value``, without walking
    ``value`` when nothing in it could need it: redacting changes a string only where ``://`` is followed, in
    that string, by ``@``, ``?`` or ``#``, and JSON writes those characters as they are, so one scan of the
    JSON text says whether to walk (a status of 10,000 tables: a second's walk saved on every request)."""
    text = json.dumps(value, default=str, **options)
    if not _MAYBE_SECRET.search(text):
        return text
    return json.dumps(redact_json(value), default=str, **options)


def _mask_parameter(parameter: str) -> str:
    name, eq, value = parameter.partition("=")
    if not eq:
        return MASK if name else ""
    return f"{name}={MASK}" if value else f"{name}="


class RedactUris(logging.Filter):
    """A handler's filter that redacts the URIs in each record's message and traceback before any formatter
    sees them (one place for every logger: ours, the format library's and third parties', whose error
    messages quote URIs as given). The record is changed in place: its message becomes the formatted,
    redacted text."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad call (arguments that do not fit): the handler reports it when it formats
            return True
        redacted = redact_uris(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_uris(record.exc_text)
        return True


__all__ = [
    "CONTAINER_SCHEMES",
    "MASK",
    "RedactUris",
    "dumps_redacted",
    "redact_json",
    "redact_uri",
    "redact_uris",
]
