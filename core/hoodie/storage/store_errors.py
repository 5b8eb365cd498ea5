"""What an object store's error answer says: whether sending the request again can help, and one line for
the operator.

``obstore`` reports an answer it has no type for (anything but not-found, already-exists and a failed
precondition) as a generic error whose text carries the HTTP status and the store's XML or JSON body. A
generic error used to count as transient (:func:`hoodie.storage.retry.transient`), so a table whose bucket
does not exist cost its eleven attempts at every poll, and the log and the status page showed the XML. Two
rules here:

- **Permanent answers are not retried** (:func:`permanent`): a bucket or container that does not exist, and
  the store refusing who we are or what we ask (401, 403, or one of :data:`PERMANENT_CODES`: bad or expired
  credentials, a signature that does not match, access denied, an invalid bucket name). Sending them again
  gives the same answer; the caller fails at once and backs off on its own schedule. Other 4xx answers stay
  transient (S3 answers 400 ``RequestTimeout`` to a slow upload, 408 and 429 are throttling), and a 404 of an
  object is a not-found, never a permanent error.
- **One line** (:func:`one_line`): the client's summary, the status and the store's code and message, with
  the body's request ids and whitespace dropped.

A store given no credentials (no keys in the storage options or the environment) asks its cloud's
instance-metadata endpoint, which off the cloud never answers: such a failure is permanent too, and its line
says what was missing (:data:`METADATA_HINTS`). Where the operator turned the endpoint off
(``AWS_EC2_METADATA_DISABLED=true``) the store is not asked at all (:mod:`hoodie.storage.credentials`).
"""

from __future__ import annotations

import re

#: Error codes of S3, GCS and Azure answers that no retry changes.
PERMANENT_CODES = frozenset(
    {
        # the bucket or container
        "NoSuchBucket",
        "ContainerNotFound",
        "InvalidBucketName",
        "AccountIsDisabled",
        # who we are
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
        "AuthenticationFailed",
        "InvalidAuthenticationInfo",
        "NoAuthenticationInformation",
        "AuthorizationHeaderMalformed",
        # what we may do
        "AccessDenied",
        "AllAccessDisabled",
        "AuthorizationFailure",
        "AuthorizationPermissionMismatch",
        "InsufficientAccountPermissions",
    }
)
#: Statuses that refuse the caller whatever the body says.
PERMANENT_STATUSES = frozenset({401, 403})

#: The credential requests each store's default chain sends to its instance-metadata endpoint (by the path
#: asked), and what the operator can set instead.
METADATA_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"/latest/(api/token|meta-data/)"),
        "no S3 credentials were found in the storage options (access_key_id, secret_access_key, "
        "session_token; skip_signature=true for a public bucket) or the environment (AWS_ACCESS_KEY_ID, "
        "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN, "
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI), so the store asked the EC2 instance-metadata endpoint, "
        "which did not answer (off EC2, set AWS_EC2_METADATA_DISABLED=true to fail at once)",
    ),
    (
        re.compile(r"/metadata/identity/oauth2/token"),
        "no Azure credentials were found in the storage options (account_key, sas_token, client_id with "
        "client_secret and tenant_id, use_emulator) or the environment (AZURE_STORAGE_ACCOUNT_KEY, "
        "AZURE_STORAGE_SAS_TOKEN, AZURE_CLIENT_ID, AZURE_CLIENT_SECRET, AZURE_TENANT_ID), so the store asked "
        "the Azure instance-metadata endpoint for a managed identity, which did not answer",
    ),
    (
        re.compile(r"/computeMetadata/v1/"),
        "no GCS credentials were found in the storage options (service_account, service_account_key) or the "
        "environment (GOOGLE_SERVICE_ACCOUNT, GOOGLE_SERVICE_ACCOUNT_KEY, GOOGLE_APPLICATION_CREDENTIALS), "
        "so the store asked the GCE metadata server, which did not answer",
    ),
)

_STATUS = re.compile(r"status code:\s*(\d{3})(?:\s+([A-Za-z][A-Za-z ]*?))?(?=[:,]|$)")
_XML_CODE = re.compile(r"<Code>\s*([^<]+?)\s*</Code>")
_XML_MESSAGE = re.compile(r"<Message>\s*([^<]*?)\s*</Message>", re.DOTALL)
_JSON_CODE = re.compile(r'"(?:code|reason)"\s*:\s*"([^"]+)"')
_JSON_MESSAGE = re.compile(r'"message"\s*:\s*"([^"]*)"')
#: Where the client's own summary ends and the store's body begins.
_BODY = re.compile(r"\s*(<\?xml|<Error|\{)", re.DOTALL)


def http_status(text: str) -> int | None:
    """The HTTP status an error's text reports (``Server returned non-2xx status code: 404 Not Found``)."""
    m = _STATUS.search(text)
    return int(m.group(1)) if m else None


def error_code(text: str) -> str | None:
    """The store's error code in an error's text (S3's and Azure's XML ``<Code>``, GCS's JSON ``reason``)."""
    m = _XML_CODE.search(text) or _JSON_CODE.search(text)
    return m.group(1).strip() if m else None


def metadata_hint(text: str) -> str | None:
    """What was missing when an error's ``text`` is a failed request to an instance-metadata endpoint."""
    return next((hint for pattern, hint in METADATA_HINTS if pattern.search(text)), None)


def permanent(text: str) -> bool:
    """Whether the answer in an error's ``text`` is one no retry changes (module doc)."""
    if metadata_hint(text) is not None:
        return True
    code = error_code(text)
    if code in PERMANENT_CODES:
        return True
    return http_status(text) in PERMANENT_STATUSES


def one_line(text: str) -> str:
    """The error ``text`` on one line: the client's summary up to the store's body, then the status and the
    body's code and message (module doc)."""
    text = text.split("\n\nDebug source:", 1)[0]
    hint = metadata_hint(text)
    body = _BODY.search(text)
    head = text[: body.start()] if body else text
    head = " ".join(head.split()).rstrip(" :")
    if hint is not None:
        return f"{head}: {hint}"
    if body is None:
        return head
    rest = text[body.start() :]
    code = error_code(rest)
    m = _XML_MESSAGE.search(rest) or _JSON_MESSAGE.search(rest)
    message = " ".join(m.group(1).split()) if m else ""
    said = ": ".join(p for p in (code, message) if p)
    return f"{head}: {said}" if said else head


__all__ = [
    "METADATA_HINTS",
    "PERMANENT_CODES",
    "PERMANENT_STATUSES",
    "error_code",
    "http_status",
    "metadata_hint",
    "one_line",
    "permanent",
]
