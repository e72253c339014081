"""Signing by the Standard Webhooks specification (standardwebhooks.com).

Each try carries `webhook-id` (the event's id, the same on every try), `webhook-timestamp`
(the try's time, in seconds) and `webhook-signature`: `v1,` and the base64 HMAC-SHA256 of
`id.timestamp.body` under the endpoint's secret (`whsec_` and base64 bytes), one for each
secret in force, separated by spaces, so a receiver that has not yet taken a rotated
secret still verifies. The `standardwebhooks` package signs; receivers verify with it or
any library that implements the specification.
"""

import base64
import secrets
from collections.abc import Iterable
from datetime import datetime

from standardwebhooks import Webhook

SECRET_PREFIX = "whsec_"
# 24 random bytes, as the specification's examples use.
SECRET_BYTES = 24


def secret_new() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def signed_headers(
    *, event_id: str, at: datetime, body: bytes, secrets_in_force: Iterable[str]
) -> dict[str, str]:
    """The three headers of one try of `body`, signed with each secret in force."""
    signatures = [
        Webhook(secret).sign(msg_id=event_id, timestamp=at, data=body)
        for secret in secrets_in_force
    ]
    return {
        "webhook-id": event_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": " ".join(signatures),
    }
