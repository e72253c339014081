"""OneDrive (and SharePoint document libraries) through Microsoft Graph.

- Changes: `driveItem: delta` on the drive's root, paged by `@odata.nextLink` until
  `@odata.deltaLink`, which is the cursor the sync saves after recording the last
  page. Graph documents delta only on a drive's root for v1.0 (`GET
  /drives/{drive-id}/root/delta`; https://learn.microsoft.com/graph/api/driveitem-delta,
  "HTTP request"), so the listing covers the drive and is filtered here to the
  connected folder by walking parent ids: delta items carry no
  `parentReference.path` ("Remarks": "always track items by id").
- A file's version is its `cTag`, which changes with the content only (`eTag`
  also changes with metadata: https://learn.microsoft.com/graph/api/resources/driveitem,
  "cTag"); OneDrive for Business leaves cTag out of delta ("Remarks"), so there
  the content hash stands in.
- A folder moved or renamed is reported alone ("Remarks"): what is under it is listed
  with `children` and reported as the listing's own (connectors/onedrive_folders.py),
  by comparing with the folders the sync recorded (connectors/folders.py).
- `410 Gone` (resync): enumeration restarts from the `Location` Graph gives, or
  from nothing, and the pages say `restarted` so the sync reconciles. So does a sync
  whose folder walks would list more than WALK_MAX_ITEMS items (onedrive_folders.py).
- Files are downloaded in the store stage from a pre-authenticated URL fetched
  right then (`@microsoft.graph.downloadUrl`); the URL is never stored, and is fetched
  only from Microsoft's download hosts (connectors/onedrive_download.py).
- Upkeep: tokens refreshed ahead of expiry and a change-notification subscription
  on the drive's root kept alive (created, renewed before it expires, recreated
  when Graph no longer knows it).
"""

import logging
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, BinaryIO

from django.conf import settings
from django.db import transaction
from django.utils.crypto import constant_time_compare, salted_hmac

from connectors import base as connectors_base
from connectors.base import (
    ChangePage,
    NeedsReconnect,
    ProviderError,
    RemoteFile,
    RemoteFolder,
)
from connectors.models import Connection
from connectors.onedrive_download import download_open
from connectors.onedrive_folders import FolderChanges, Tree, WalkTooLong
from connectors.onedrive_graph import (
    GraphClient,
    OneDriveConfig,
    Tokens,
    TokenSource,
    status_problem,
    tokens_refreshed,
)
from connectors.onedrive_items import gone_file, item_file
from connectors.services import connection_credentials, connection_set_credentials
from core.secrets import CredentialsUnreadable
from core.text import ascii_number
from pipeline.errors import PermanentError, TransientError

logger = logging.getLogger(__name__)

# Change-notification subscriptions are made for this long (Graph's limit for drive items
# is 42,300 minutes) and renewed when less than the renew margin is left.
SUBSCRIPTION_MINUTES = 4320
SUBSCRIPTION_RENEW_SECONDS = 86_400


def client_state(connection_id: int) -> str:
    """The secret Graph echoes in each notification: names the connection and proves it
    came from a subscription we made (an HMAC under SECRET_KEY; at most 128 characters)."""
    mac = salted_hmac("paperlane.onedrive.clientState", str(connection_id), algorithm="sha256")
    return f"{connection_id}.{mac.hexdigest()[:48]}"


def client_state_connection(value: str) -> int | None:
    """The connection a notification's clientState is for, or None if it is not ours."""
    connection_id = ascii_number(value.partition(".")[0])
    if connection_id is None or not constant_time_compare(value, client_state(connection_id)):
        return None
    return connection_id


def onedrive_tokens_refresh(
    *, connection: Connection, stale: Tokens, config: OneDriveConfig
) -> Tokens:
    """New tokens for the connection, saved (encrypted) before they are used.

    The row is locked while refreshing, so a sync and a store stage that both find
    the token expired refresh it once: the second finds the first's tokens.
    NeedsReconnect when Microsoft refuses the refresh token (consent revoked).
    """
    with transaction.atomic():
        locked = Connection.objects.select_for_update().get(id=connection.id)
        credentials = _credentials(locked)
        current = Tokens.from_dict(credentials)
        if current.access_token != stale.access_token and not current.expiring(
            config.refresh_margin
        ):
            return current
        fresh = tokens_refreshed(config=config, refresh_token=current.refresh_token)
        connection_set_credentials(
            connection=locked, credentials={**credentials, **fresh.as_dict()}
        )
    connection.credentials_encrypted = locked.credentials_encrypted
    return fresh


def _credentials(connection: Connection) -> dict[str, Any]:
    try:
        return connection_credentials(connection=connection)
    except CredentialsUnreadable:
        raise NeedsReconnect(
            "The stored OneDrive sign-in cannot be read (the key changed); connect again."
        ) from None


def connection_client(connection: Connection, config: OneDriveConfig | None = None) -> GraphClient:
    """A Graph client whose tokens are the connection's, refreshed and saved as needed."""
    config = config or OneDriveConfig.from_settings()

    def source(stale: Tokens | None) -> Tokens:
        if stale is None:
            return Tokens.from_dict(_credentials(connection))
        return onedrive_tokens_refresh(connection=connection, stale=stale, config=config)

    tokens: TokenSource = source
    return GraphClient(config=config, tokens=tokens)


def _drive(connection: Connection) -> str:
    drive = (connection.provider_state or {}).get("drive_id")
    if not drive:
        raise NeedsReconnect("The OneDrive connection has no drive; connect it again.")
    return urllib.parse.quote(str(drive), safe="!")


class OneDriveProvider:
    name = "onedrive"

    @property
    def config(self) -> OneDriveConfig:
        # Read at each call: the registry keeps one provider for the process.
        return OneDriveConfig.from_settings()

    def changes(self, connection: Connection, cursor: str | None) -> Iterator[ChangePage]:
        client = connection_client(connection, self.config)
        drive = _drive(connection)
        fresh = client.url(f"/drives/{drive}/root/delta")
        tree = Tree(client, drive, connection.folder_id, connection.folder_path)
        folders = FolderChanges(
            client=client,
            drive=drive,
            connection=connection,
            tree=tree,
        )
        restarted = False
        if cursor and not folders.store.populated():
            # Listed before its folders were kept: without them a move cannot be told,
            # so enumerate once from scratch (which reconciles, as after a 410).
            restarted = True
        url = fresh if restarted else cursor or fresh
        connected_seen = False
        while True:
            answer = client.call("GET", url)
            if answer.status == 410 and not restarted:
                # Graph forgot the token: enumerate everything again, from where it says.
                restarted, connected_seen = True, False
                url = answer.headers.get("location") or fresh
                continue
            if answer.status != 200:
                raise ProviderError(
                    f"OneDrive answered {answer.status} {answer.error_code()} while listing.",
                    kind=status_problem(answer.status),
                )
            data = answer.json()
            items = [i for i in data.get("value") or [] if isinstance(i, dict) and i.get("id")]
            # An item may appear more than once in a feed; the last occurrence wins.
            latest = {item["id"]: item for item in items}
            # Deleted items too: Business may leave facets off them, and the folders the
            # sync recorded are known by id.
            folder_items = [
                i for i in latest.values() if "folder" in i or "root" in i or "deleted" in i
            ]
            for item in folder_items:
                tree.learn(item)
            connected = latest.get(connection.folder_id)
            connected_seen |= connected is not None and "deleted" not in connected
            incremental = bool(cursor) and not restarted
            records, walks = folders.plan(folder_items, incremental=incremental)
            try:
                for walk in walks:
                    yield from folders.walk(*walk)
            except WalkTooLong:
                # More moved than one sync lists folder by folder: enumerate the whole
                # drive again instead, and reconcile at its end.
                restarted, connected_seen = True, False
                url = fresh
                continue
            files = self._files(tree, latest.values(), incremental=incremental)
            next_link = data.get("@odata.nextLink")
            delta_link = data.get("@odata.deltaLink")
            if not next_link and not incremental and not connected_seen:
                # A full listing that never named the connected folder (it is gone):
                # recorded all the same, so the next sync does not start over again.
                name = connection.folder_path.rstrip("/").rpartition("/")[2]
                records.append(RemoteFolder(connection.folder_id, "", name))
            records = folders.settled(records)
            if next_link:
                yield ChangePage(files=files, folders=records, cursor=None, restarted=restarted)
                url = next_link
            elif delta_link:
                yield ChangePage(
                    files=files, folders=records, cursor=delta_link, restarted=restarted
                )
                return
            else:
                raise ProviderError("OneDrive ended a listing without a link to continue from.")

    def _files(self, tree: Tree, items, *, incremental: bool) -> list[RemoteFile]:
        files = []
        for item in items:
            if "folder" in item or "root" in item or item["id"] == tree.folder_id:
                continue
            if "deleted" in item:
                # No name or place on a deleted item (Business): the sync knows the id or not.
                files.append(gone_file(item))
                continue
            if "file" not in item:
                continue
            relative = tree.relative((item.get("parentReference") or {}).get("id"))
            if relative is None:
                if incremental:
                    # Changed outside the folder: moved out, if we had it.
                    files.append(gone_file(item))
                continue
            found = item_file(item, tree.path(relative, str(item.get("name", ""))))
            if found is not None:
                files.append(found)
        return files

    def open(self, connection: Connection, file_id: str) -> BinaryIO:
        """The file's bytes as a stream from a pre-authenticated URL fetched just now (never
        stored). The store stage reads it within its size and time limits."""
        client = connection_client(connection, self.config)
        quoted = urllib.parse.quote(file_id, safe="!")
        item_url = client.url(
            f"/drives/{_drive(connection)}/items/{quoted}"
            "?$select=id,size,@microsoft.graph.downloadUrl"
        )
        for _ in range(2):
            answer = client.call("GET", item_url)
            if answer.status == 404:
                raise PermanentError(
                    "The file is no longer in the OneDrive folder.", code="source_missing"
                )
            if answer.status != 200:
                raise TransientError(
                    f"OneDrive answered {answer.status} for the file.", code="source_unavailable"
                )
            link = answer.json().get("@microsoft.graph.downloadUrl")
            if not link:
                raise PermanentError(
                    "OneDrive offers no download for this file.", code="source_missing"
                )
            stream = download_open(link, timeout=self.config.timeout)
            if stream is not None:
                return stream
            # The short-lived URL expired between fetching and using it: fetch another.
        raise TransientError("OneDrive's download link kept expiring.", code="source_unavailable")

    def maintain(self, connection: Connection) -> None:
        """Refresh tokens that would expire before the next upkeep; keep the change
        notification subscription alive (when a notification URL is set)."""
        client = connection_client(connection, self.config)
        tokens = Tokens.from_dict(_credentials(connection))
        ahead = self.config.refresh_margin + connectors_base.MAINTAIN_SECONDS
        if tokens.expiring(ahead):
            onedrive_tokens_refresh(connection=connection, stale=tokens, config=self.config)
        if settings.PAPERLANE_ONEDRIVE_NOTIFICATION_URL:
            subscription_keep(connection=connection, client=client)

    def disconnect(self, connection: Connection, *, credentials: dict, state: dict) -> str:
        """Delete the connection's change-notification subscription, if it has one, with
        the tokens it had (refreshed in memory if they expired, never saved again)."""
        subscription = state.get("subscription")
        if not subscription:
            return ""
        config = self.config.for_request()
        until = subscription.get("expires_at", "")[:16].replace("T", " ")
        left = f"; Graph ends it by itself by {until} UTC" if until else ""

        def source(stale: Tokens | None) -> Tokens:
            current = Tokens.from_dict(credentials)
            if stale is None:
                return current
            return tokens_refreshed(config=config, refresh_token=current.refresh_token)

        client = GraphClient(config=config, tokens=source)
        sub_id = urllib.parse.quote(str(subscription.get("id", "")), safe="")
        try:
            answer = client.call("DELETE", client.url(f"/subscriptions/{sub_id}"))
        except ProviderError as exc:
            logger.warning("connection %s: subscription not deleted: %s", connection.id, exc)
            return f"Its change notifications could not be stopped just now{left}."
        if answer.status in (200, 204, 404):
            return "Its change notifications were stopped."
        logger.warning(
            "connection %s: subscription not deleted: %s %s",
            connection.id,
            answer.status,
            answer.error_code(),
        )
        return f"Its change notifications could not be stopped just now{left}."


# --- change notifications ------------------------------------------------------------


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _save_subscription(connection: Connection, subscription: dict | None) -> None:
    with transaction.atomic():
        locked = Connection.objects.select_for_update().get(id=connection.id)
        state = dict(locked.provider_state or {})
        if subscription is None:
            state.pop("subscription", None)
        else:
            state["subscription"] = subscription
        locked.provider_state = state
        locked.save(update_fields=["provider_state", "updated_at"])
    connection.provider_state = state


def subscription_keep(*, connection: Connection, client: GraphClient) -> dict:
    """The connection's subscription, created, renewed or recreated as needed.

    driveItem subscriptions last at most 42,300 minutes and support only changeType
    "updated" (https://learn.microsoft.com/graph/api/resources/subscription, "Subscription
    lifetime"); on OneDrive for Business only the root folder can be subscribed to.
    """
    now = datetime.now(UTC)
    expires = now + timedelta(minutes=SUBSCRIPTION_MINUTES)
    margin = timedelta(seconds=SUBSCRIPTION_RENEW_SECONDS)
    current = (connection.provider_state or {}).get("subscription")
    if current:
        if datetime.fromisoformat(current["expires_at"]) - margin > now:
            return current
        answer = client.call(
            "PATCH",
            client.url(f"/subscriptions/{urllib.parse.quote(current['id'], safe='')}"),
            body={"expirationDateTime": _iso(expires)},
        )
        if answer.status == 200:
            renewed = {"id": current["id"], "expires_at": expires.isoformat()}
            _save_subscription(connection, renewed)
            return renewed
        if answer.status != 404:
            raise ProviderError(
                f"OneDrive refused to renew the change notifications ({answer.status})."
            )
        # Gone (expired, or removed by Graph): make a new one.
    answer = client.call(
        "POST",
        client.url("/subscriptions"),
        body={
            "changeType": "updated",
            "notificationUrl": settings.PAPERLANE_ONEDRIVE_NOTIFICATION_URL,
            "resource": f"/drives/{_drive(connection)}/root",
            "expirationDateTime": _iso(expires),
            "clientState": client_state(connection.id),
        },
    )
    if answer.status not in (200, 201):
        _save_subscription(connection, None)
        raise ProviderError(
            f"OneDrive refused change notifications ({answer.status} {answer.error_code()}); "
            "the periodic sync still runs."
        )
    made = answer.json()
    subscription = {"id": str(made["id"]), "expires_at": expires.isoformat()}
    _save_subscription(connection, subscription)
    return subscription
