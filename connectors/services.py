"""Connections: made, paused, resumed, asked to sync, disconnected; who may do so; their
credentials kept encrypted. Each change of a connection's status is a move of
connectors/status.py, which writes its history row in the same transaction.

The sync itself (listing changes, recording imports, starting runs) is the
pipeline's (`connectors/sync.py`); these are what people and providers do
to a connection.
"""

import logging
import os
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Case, F, Q, QuerySet, Value, When
from django.utils import timezone

from connectors.local_roots import local_folder_refusal, local_folder_resolve
from connectors.models import Connection, ConnectionSync
from connectors.onedrive_folders import folder_resolve
from connectors.onedrive_graph import OneDriveConfig, tokens_from_code
from connectors.registry import provider_for
from connectors.selectors import connection_signed_in_by_former_member
from connectors.status import MOVES, connection_move
from core.errors import Conflict, InvalidUpload
from core.secrets import (
    CredentialsUnreadable,
    ReencryptReport,
    credentials_decrypt,
    credentials_encrypt,
    credentials_reencrypt,
    credentials_under_newest_key,
)
from documents.models import Membership, Organisation
from documents.roles import Ability
from pipeline.services.transitions import Actor

logger = logging.getLogger(__name__)

Status = Connection.Status
# What Paperlane itself does (a member's departure, a change notification, the connectors
# loop): every service here takes its actor by name, and system call sites pass this one.
SYSTEM = Actor("system")


def connection_create_local(
    *, organisation: Organisation, path: str, created_by: AbstractBaseUser | None = None
) -> Connection:
    """Connect a local (or mounted) folder of this server: an operator's choice of path.

    The path is resolved once (links followed, `..` removed) and its real path must be
    inside PAPERLANE_LOCAL_FOLDER_ROOTS and none of Paperlane's own folders
    (connectors/local_roots.py; refused with the reason in plain words, which name no
    other folder of the server, before anything about the path is looked at). The
    folder must exist and be readable; it is only ever read. Connecting the same folder
    to the same organisation again returns the existing connection.
    """
    folder = local_folder_resolve(path)
    refusal = local_folder_refusal(folder)
    if refusal:
        logger.info("local folder refused: %s", refusal.detail)
        raise InvalidUpload(refusal.plain, code="folder_not_allowed")
    if not os.path.isdir(folder):
        raise InvalidUpload(f"{folder} is not a folder.", code="folder_missing")
    if not os.access(folder, os.R_OK | os.X_OK):
        raise InvalidUpload(f"{folder} cannot be read.", code="folder_unreadable")
    actor = Actor.of(user=created_by)
    with transaction.atomic():
        connection, new = _locked_or_new(
            organisation=organisation,
            provider=Connection.Provider.LOCAL,
            folder_id=folder,
            folder_path=folder,
            created_by=created_by,
        )
        if new:
            connection_move(connection=connection, move="connect", actor=actor)
        elif connection.status == Status.DISCONNECTED:
            connection.created_by = created_by or connection.created_by
            connection_make_active(
                connection=connection, move="reconnect", actor=actor, also_save=("created_by",)
            )
    return connection


def _locked_or_new(
    *, organisation: Organisation, provider: str, folder_id: str, **fields
) -> tuple[Connection, bool]:
    """The organisation's connection to the folder, its row locked, or a new one with
    `fields`, not saved yet (its `connect` move inserts it); and whether it is new."""
    found = (
        Connection.objects.select_for_update()
        .filter(organisation=organisation, provider=provider, folder_id=folder_id)
        .first()
    )
    if found is not None:
        return found, False
    made = Connection(organisation=organisation, provider=provider, folder_id=folder_id, **fields)
    return made, True


@transaction.atomic
def connection_connect_onedrive(
    *,
    organisation: Organisation,
    drive_id: str,
    folder_id: str,
    folder_path: str,
    credentials: dict,
    created_by: AbstractBaseUser | None,
    actor: Actor | None = None,
) -> Connection:
    """The organisation's connection to this OneDrive folder with these credentials (the
    sign-in of `created_by`), active and due to sync now. Connecting the same folder
    again reconnects it (new tokens, same cursor and imports), which is how `needs
    reconnect` is cleared. Forbidden unless the actor (`created_by` acting for themself,
    unless another `actor` is named) may manage the organisation's connections: an admin.
    One of the two must be given."""
    if actor is None:
        if created_by is None:
            raise TypeError("connecting OneDrive takes the person connecting or an actor")
        actor = Actor.of(user=created_by)
    actor.require(organisation_id=organisation.id, ability=Ability.CONNECTIONS)
    connection, new = _locked_or_new(
        organisation=organisation, provider=Connection.Provider.ONEDRIVE, folder_id=folder_id
    )
    connection.folder_path = folder_path
    connection.credentials_encrypted = credentials_encrypt(credentials)
    connection.provider_state = {**(connection.provider_state or {}), "drive_id": drive_id}
    # Whose sign-in the connection reads with: whoever connected it last.
    connection.created_by = created_by or connection.created_by
    connection_make_active(
        connection=connection,
        move="connect" if new else "reconnect",
        actor=actor,
        also_save=("folder_path", "credentials_encrypted", "provider_state", "created_by"),
    )
    return connection


def connection_connect_onedrive_signed_in(
    *,
    organisation: Organisation,
    code: str,
    code_verifier: str,
    redirect_uri: str,
    folder_path: str,
    created_by: AbstractBaseUser,
) -> Connection:
    """Connect the OneDrive folder `folder_path` of the person Microsoft's sign-in sent
    back with `code`: the code exchanged for tokens, the folder found in their drive, then
    `connection_connect_onedrive`. The person waits on these calls: each has the short
    budget of a request, and a busy Microsoft is said (ProviderBusy), not waited for.
    ProviderError in plain words if the sign-in or the folder is refused."""
    config = OneDriveConfig.from_settings().for_request()
    tokens = tokens_from_code(
        config=config, code=code, code_verifier=code_verifier, redirect_uri=redirect_uri
    )
    drive_id, folder_id = folder_resolve(config=config, tokens=tokens, path=folder_path)
    return connection_connect_onedrive(
        organisation=organisation,
        drive_id=drive_id,
        folder_id=folder_id,
        folder_path=folder_path,
        credentials=tokens.as_dict(),
        created_by=created_by,
    )


def connection_credentials(*, connection: Connection) -> dict:
    """The connection's credentials, decrypted (CredentialsUnreadable if the key changed)."""
    return credentials_decrypt(connection.credentials_encrypted)


def connection_set_credentials(*, connection: Connection, credentials: dict) -> None:
    """Store new credentials (encrypted), e.g. after a token refresh or a reconnect."""
    connection.credentials_encrypted = credentials_encrypt(credentials)
    connection.save(update_fields=["credentials_encrypted", "updated_at"])


def connection_credentials_reencrypt() -> ReencryptReport:
    """Rewrite every connection's stored credentials under the newest of
    PAPERLANE_CONNECTOR_KEYS, so that the older keys can be dropped.

    Each connection is rewritten under its row lock (a token refresh that saves new
    credentials meanwhile is either before or after, never lost). Running it again
    rewrites nothing."""
    reencrypted, current, unreadable = 0, 0, []
    stored = Connection.objects.exclude(credentials_encrypted="").order_by("id")
    for connection_id in stored.values_list("id", flat=True).iterator():
        with transaction.atomic():
            connection = (
                Connection.objects.select_for_update()
                .only("id", "credentials_encrypted")
                .filter(id=connection_id)
                .first()
            )
            if connection is None or not connection.credentials_encrypted:
                continue
            token = connection.credentials_encrypted
            if credentials_under_newest_key(token):
                current += 1
                continue
            try:
                connection.credentials_encrypted = credentials_reencrypt(token)
            except CredentialsUnreadable:
                unreadable.append(connection_id)
                continue
            connection.save(update_fields=["credentials_encrypted", "updated_at"])
            reencrypted += 1
    return ReencryptReport(reencrypted=reencrypted, current=current, unreadable=unreadable)


def _locked(connection: Connection) -> Connection:
    return Connection.objects.select_for_update().get(id=connection.id)


def _check_may_manage(connection: Connection, actor: Actor) -> None:
    """Pausing, resuming and disconnecting take an admin of the connection's organisation,
    or an operator in the admin (Forbidden otherwise); the system may."""
    actor.require(organisation_id=connection.organisation_id, ability=Ability.CONNECTIONS)


def _who(actor: Actor) -> str:
    return actor.user.get_username() if actor.user is not None else actor.label


@transaction.atomic
def connection_pause(
    *, connection: Connection, actor: Actor, reason: str = "paused by a person"
) -> Connection:
    """Stop syncing until resumed (runs already started go on). Pausing again, or pausing
    a disconnected connection, changes nothing."""
    _check_may_manage(connection, actor)
    connection = _locked(connection)
    # Paused already, or disconnected: nothing to do.
    if connection.status in MOVES["pause"].leaves:
        connection_move(connection=connection, move="pause", actor=actor, reason=reason)
    return connection


def connection_make_active(
    *, connection: Connection, move: str, actor: Actor, also_save: tuple[str, ...] = ()
) -> None:
    """Make `move` (connect, reconnect or resume): active, no failures counted, due to
    sync now; saved with the `also_save` fields the caller changed. The caller holds the
    row's lock (or the connection is new)."""
    connection.consecutive_failures = 0
    connection.next_sync_at = timezone.now()
    connection_move(
        connection=connection,
        move=move,
        actor=actor,
        also_save=(*also_save, "consecutive_failures", "next_sync_at"),
    )


@transaction.atomic
def connection_resume(*, connection: Connection, actor: Actor) -> Connection:
    """Sync again now, with a clean failure count. A connection that needs reconnecting,
    or was disconnected, or reads with the sign-in of someone who has left the
    organisation, must be connected again instead (409)."""
    _check_may_manage(connection, actor)
    connection = _locked(connection)
    if connection.status in (Status.NEEDS_RECONNECT, Status.DISCONNECTED):
        raise Conflict("This connection must be connected again before it can sync.")
    if connection_signed_in_by_former_member(connection):
        raise Conflict(
            "This folder was connected with the sign-in of someone who is no longer a "
            "member: connect it again with yours.",
            code="connected_by_former_member",
        )
    if connection.status != Status.ACTIVE:
        connection_make_active(connection=connection, move="resume", actor=actor)
    return connection


def connections_pause_of_former_member(
    *, organisation: Organisation, user: AbstractBaseUser
) -> int:
    """Pause the connections `user` made in `organisation`, which they just left (a
    OneDrive folder reads with their sign-in; a local folder was their choice), and the
    OneDrive ones that read with no one's sign-in any more (an account deleted). Runs in
    the removal's transaction (documents' member_remove, and any deletion of a
    membership: both registered in apps.py); returns how many it paused, and pausing
    again pauses nothing. A OneDrive one syncs again once an admin connects it with
    their own sign-in; a local one once an admin resumes it."""
    return _pause_of_former_member(
        organisation=organisation, user_id=user.pk, username=user.get_username()
    )


def _pause_of_former_member(*, organisation: Organisation, user_id: int, username: str) -> int:
    made = Q(created_by_id=user_id) | Q(provider=Connection.Provider.ONEDRIVE, created_by=None)
    paused = 0
    for connection in _still_syncing(Connection.objects.filter(made, organisation=organisation)):
        signer = username if connection.created_by_id is not None else ""
        reason = _former_member_reason(organisation, signer)
        connection_pause(connection=connection, reason=reason, actor=SYSTEM)
        paused += 1
    return paused


def _former_member_reason(organisation: Organisation, username: str) -> str:
    where = organisation.name or organisation.slug
    if username:
        return f"Paused: {username}, who connected it, is no longer a member of {where}."
    return f"Paused: whoever connected it with their sign-in is no longer a member of {where}."


def connection_pause_if_signed_in_by_former_member(*, connection: Connection) -> bool:
    """Pause `connection` if it is a OneDrive one that reads with the sign-in of someone
    who is not a member (the connectors' upkeep checks, whatever took them out); whether
    it did."""
    if connection.status in (Status.PAUSED, Status.DISCONNECTED):
        return False
    if not connection_signed_in_by_former_member(connection):
        return False
    signer = connection.created_by.get_username() if connection.created_by_id else ""
    reason = _former_member_reason(connection.organisation, signer)
    connection_pause(connection=connection, reason=reason, actor=SYSTEM)
    return True


def _still_syncing(connections: QuerySet[Connection]) -> QuerySet[Connection]:
    return connections.exclude(status__in=[Status.PAUSED, Status.DISCONNECTED]).defer("cursor")


def connections_pause_on_membership_deleted(*, instance: Membership, origin=None, **_) -> None:
    """A membership deleted however it happens (member_remove, the admin, its row deleted,
    its user's account deleted): the connections made with it pause, in the deletion's
    transaction (post_delete of Membership, registered in apps.py). An organisation being
    deleted takes its connections with it: nothing to pause."""
    if isinstance(origin, Organisation) or (
        isinstance(origin, QuerySet) and issubclass(origin.model, Organisation)
    ):
        return
    organisation = Organisation.objects.filter(id=instance.organisation_id).first()
    if organisation is None:
        return
    # An account being deleted is still there until its memberships are gone, but the
    # connections it made no longer name it (SET_NULL came first): its OneDrive ones are
    # paused as read with no one's sign-in.
    user = get_user_model().objects.filter(pk=instance.user_id).first()
    _pause_of_former_member(
        organisation=organisation,
        user_id=instance.user_id,
        username=user.get_username() if user is not None else "",
    )


def connection_disconnect(*, connection: Connection, actor: Actor) -> Connection:
    """Disconnect a connection: it stops syncing for good, its tokens are deleted and
    what the provider keeps for it is undone (OneDrive's change-notification
    subscription), while its documents and the record of its imports stay. A sync
    running now loses its lease at its next page; files not yet fetched are not
    fetched. Connecting the same folder again brings it back, with its imports.
    Disconnecting again changes nothing."""
    _check_may_manage(connection, actor)
    with transaction.atomic():
        connection = _locked(connection)
        if connection.status == Status.DISCONNECTED:
            return connection
        try:
            credentials = credentials_decrypt(connection.credentials_encrypted)
        except CredentialsUnreadable:
            credentials = {}
        kept = dict(connection.provider_state or {})
        state = {k: v for k, v in kept.items() if k != "subscription"}
        connection.credentials_encrypted = ""
        connection.provider_state = state
        connection.sync_owner, connection.sync_lease_until = "", None
        connection.next_sync_at = connection.sync_requested_at = None
        event = connection_move(
            connection=connection,
            move="disconnect",
            actor=actor,
            reason=f"Disconnected by {_who(actor)}; its documents stay.",
            # The row's reason is what the provider said when it undid its part (below).
            history_reason="",
            also_save=DISCONNECT_FIELDS,
        )
    # Outside the transaction: the provider's call must not hold the row.
    try:
        note = provider_for(connection).disconnect(connection, credentials=credentials, state=kept)
    except Exception as exc:  # best effort: the connection is disconnected whatever it says
        logger.warning("connection %s: provider disconnect failed", connection.id, exc_info=True)
        note = f"What the provider keeps for it could not be undone ({type(exc).__name__})."
    if note and event is not None:
        event.reason = note
        event.save(update_fields=["reason"])
    return connection


DISCONNECT_FIELDS = (
    "credentials_encrypted",
    "provider_state",
    "sync_owner",
    "sync_lease_until",
    "next_sync_at",
    "sync_requested_at",
)


def connection_request_sync(*, connection_id: int, actor: Actor) -> bool:
    """Ask for a sync soon ("sync now", a change notification). False if no such
    connection. For the system (a change notification) it is one UPDATE, no lock, so a
    burst of notifications costs a burst of cheap updates.

    A person asking (a user or an API token; an operator in the admin) must be allowed
    to send work to the organisation, as an upload does (Forbidden otherwise), and also
    ends the backoff that failed syncs earned: they may just have mended what failed. A
    wait the provider asked for (busy, Retry-After) still holds, for people as for
    notifications. The system (a change notification) is not checked."""
    now = timezone.now()
    fields: dict = {"sync_requested_at": now}
    if actor.user is not None or actor.api_token is not None:
        organisation_id = (
            Connection.objects.filter(id=connection_id)
            .values_list("organisation_id", flat=True)
            .first()
        )
        if organisation_id is None:
            return False
        # A sync imports files, as an upload does.
        actor.require(organisation_id=organisation_id, ability=Ability.UPLOAD)
        fields["next_sync_at"] = Case(
            When(last_sync_result=Connection.Result.FAILED, then=Value(now)),
            default=F("next_sync_at"),
        )
    connections = Connection.objects.filter(id=connection_id).exclude(status=Status.DISCONNECTED)
    return connections.update(**fields) == 1


# The syncs of a connection its pages show (the newest), kept whatever their age.
SYNCS_ALWAYS_KEPT = 20
# Syncs one housekeeping pass may delete.
SYNCS_PER_PASS = 10_000
# Syncs older than this many days are deleted by the sweeper's housekeeping (a folder
# synced every few seconds records thousands a day).
SYNC_HISTORY_DAYS = 30


def connection_syncs_prune(*, older_than: datetime, limit: int) -> int:
    """Delete finished syncs that started before `older_than`, but never a connection's
    newest SYNCS_ALWAYS_KEPT; at most `limit` rows, each connection's oldest first.
    Returns how many went. A folder synced every few seconds records thousands of syncs
    a day, so the history is kept for a while, not for ever."""
    deleted = 0
    for connection_id in Connection.objects.order_by("id").values_list("id", flat=True):
        if deleted >= limit:
            break
        syncs = ConnectionSync.objects.filter(connection_id=connection_id)
        newest = syncs.order_by("-started_at", "-id").values_list("id", flat=True)
        old = (
            syncs.filter(started_at__lt=older_than, finished_at__isnull=False)
            .exclude(id__in=list(newest[:SYNCS_ALWAYS_KEPT]))
            .order_by("started_at", "id")
            .values_list("id", flat=True)
        )
        ids = list(old[: limit - deleted])
        if ids:
            deleted += ConnectionSync.objects.filter(id__in=ids).delete()[0]
    return deleted


def connection_syncs_prune_old() -> int:
    """The sweeper's housekeeping (registered in connectors/apps.py): syncs older than
    SYNC_HISTORY_DAYS go, SYNCS_PER_PASS at most. Returns how many went."""
    older_than = timezone.now() - timedelta(days=SYNC_HISTORY_DAYS)
    return connection_syncs_prune(older_than=older_than, limit=SYNCS_PER_PASS)
