"""A local Microsoft Graph and identity platform for the OneDrive tests.

A threaded HTTP server on 127.0.0.1 that answers the calls Paperlane makes the
way Graph documents them: a mutable drive (folders, files with content, cTag
and eTag), `driveItem: delta` paging with `@odata.nextLink` and
`@odata.deltaLink`, deleted items, parents included with changed children, no
`parentReference.path` in delta (as Graph), a moved or renamed folder reported
alone (not what is under it: "Remarks" of driveItem-delta), a folder's
`children` paged by `@odata.nextLink`, `410 Gone` for an expired token with
a `Location` that starts over, `429`/`503` with `Retry-After` on demand, the v2.0
token endpoint (authorization_code with PKCE and refresh_token grants, rotated
refresh tokens, expired access tokens answered `401`, revoked consent answered
`400 invalid_grant`), short-lived pre-authenticated download URLs, and
subscriptions (create with the notificationUrl validation handshake, renew,
`404` once gone) that can send change notifications.
"""

import base64
import hashlib
import hmac
import http.client
import itertools
import json
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler

import httpx
import pytest

from tests.support.loopback import LoopbackServer

DRIVE_ID = "b!fakeDrive0001"
ROOT_ID = "ROOT"
MIME = {
    ".pdf": "application/pdf",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".txt": "text/plain",
    ".png": "image/png",
}


@dataclass
class Item:
    id: str
    name: str
    parent_id: str | None
    is_folder: bool
    content: bytes = b""
    mime: str = ""
    seq: int = 0
    content_rev: int = 1
    meta_rev: int = 1
    deleted: bool = False

    @property
    def ctag(self) -> str:
        return f'"c:{{{self.id}}},{self.content_rev}"'

    @property
    def etag(self) -> str:
        return f'"{{{self.id}}},{self.content_rev + self.meta_rev}"'


@dataclass
class Listing:
    """One delta enumeration, frozen when its first page is asked for."""

    items: list[str]
    end_seq: int
    restarted_from: str | None = None


@dataclass
class Subscription:
    id: str
    resource: str
    notification_url: str
    client_state: str
    expires: datetime
    change_type: str


@dataclass
class Grant:
    code_challenge: str
    redirect_uri: str
    scope: str


@dataclass
class GraphState:
    items: dict[str, Item] = field(default_factory=dict)
    seq: int = 0
    listings: dict[str, Listing] = field(default_factory=dict)
    # Delta tokens at or below this sequence answer 410 (Graph forgot them).
    forgotten_before: int = 0
    page_size: int = 3
    # Items listed twice in every enumeration they are part of (Graph may do this).
    repeat: set[str] = field(default_factory=set)
    # Queued failures for the next Graph API calls: (status, retry_after, and the part of
    # the path a call must have to fail; "" for any call).
    failures: list[tuple[int, int, str]] = field(default_factory=list)
    access_tokens: dict[str, float] = field(default_factory=dict)
    refresh_tokens: set[str] = field(default_factory=set)
    codes: dict[str, Grant] = field(default_factory=dict)
    consent_revoked: bool = False
    access_token_seconds: int = 3600
    download_seconds: int = 60
    subscriptions: dict[str, Subscription] = field(default_factory=dict)
    # Whether creating or renewing a subscription calls its notificationUrl first.
    validate_notification_url: bool = True
    # "business" (OneDrive for work or school): delta leaves cTag out of created and
    # modified items, as Graph documents; "personal" keeps it.
    drive_type: str = "personal"
    requests: list[tuple[str, str]] = field(default_factory=list)
    # Where the download URLs it hands out point: its own address unless a test names
    # another origin (the same server by another name, a redirecting server).
    download_origin: str = ""
    token_grants: list[str] = field(default_factory=list)
    # Changes made to the drive once, just before a call whose path has the given part.
    before_call: list[tuple[str, Callable[[], None]]] = field(default_factory=list)


class GraphServer:
    """Start with `with GraphServer() as graph:`; `graph.url` is the base for both
    Graph (`{url}/v1.0`) and the login host (`{url}`)."""

    client_id = "paperlane-test-client"
    client_secret = "paperlane-test-secret"
    tenant = "contoso-tenant"

    def __init__(self) -> None:
        self.state = GraphState()
        self.lock = threading.RLock()
        self._ids = itertools.count(1)
        self._signing_key = secrets.token_bytes(16)
        self.state.items[ROOT_ID] = Item(id=ROOT_ID, name="root", parent_id=None, is_folder=True)
        self._httpd = LoopbackServer(_handler(self))

    def __enter__(self) -> "GraphServer":
        self._httpd.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.stop()

    @property
    def url(self) -> str:
        return self._httpd.url

    @property
    def graph_url(self) -> str:
        return f"{self.url}/v1.0"

    # --- the drive ------------------------------------------------------------

    def _touch(self, item: Item) -> None:
        self.state.seq += 1
        item.seq = self.state.seq

    def folder(self, path: str) -> str:
        """Make the folders of `path` ("Docs/2024") that are missing; return the last id."""
        with self.lock:
            parent = ROOT_ID
            for name in [p for p in path.split("/") if p]:
                found = self._child(parent, name)
                if found is None:
                    found = Item(id=self._new_id(), name=name, parent_id=parent, is_folder=True)
                    self.state.items[found.id] = found
                    self._touch(found)
                parent = found.id
            return parent

    def put(self, path: str, content: bytes, *, mime: str | None = None) -> str:
        """Create or overwrite the file at `path`; return its id."""
        with self.lock:
            folder, _, name = path.rpartition("/")
            parent = self.folder(folder)
            item = self._child(parent, name)
            if item is None:
                suffix = "." + name.rpartition(".")[2].lower() if "." in name else ""
                item = Item(
                    id=self._new_id(),
                    name=name,
                    parent_id=parent,
                    is_folder=False,
                    mime=mime or MIME.get(suffix, "application/octet-stream"),
                )
                self.state.items[item.id] = item
            else:
                item.content_rev += 1
            item.content = content
            self._touch(item)
            self._touch_ancestors(item)
            return item.id

    def rename(self, item_id: str, name: str) -> None:
        """A metadata change: eTag changes, cTag does not."""
        with self.lock:
            item = self.state.items[item_id]
            item.name = name
            item.meta_rev += 1
            self._touch(item)

    def move(self, item_id: str, folder_path: str) -> None:
        with self.lock:
            item = self.state.items[item_id]
            item.parent_id = self.folder(folder_path)
            item.meta_rev += 1
            self._touch(item)
            self._touch_ancestors(item)

    def delete(self, item_id: str, *, report_contents: bool = True) -> None:
        """Delete an item; a folder goes with everything under it (to the recycle bin:
        gone from `children` and item GETs). Delta reports the folder deleted and, with
        `report_contents`, what was under it too; without, the folder alone."""
        with self.lock:
            item = self.state.items[item_id]
            under = self._descendants(item.id) if item.is_folder else []
            for gone in under:
                gone.deleted = True
                if report_contents:
                    self._touch(gone)
            item.deleted = True
            self._touch(item)

    def _descendants(self, folder_id: str) -> list[Item]:
        found, frontier = [], [folder_id]
        while frontier:
            children = [
                i
                for i in self.state.items.values()
                if i.parent_id in frontier and not i.deleted and i.id != ROOT_ID
            ]
            found += children
            frontier = [c.id for c in children if c.is_folder]
        return found

    def _touch_ancestors(self, item: Item) -> None:
        # Graph returns the parents of a changed item in its delta unless
        # deltaExcludeParent is sent; their seq moves with the change.
        parent = item.parent_id
        while parent is not None and parent != ROOT_ID:
            self._touch(self.state.items[parent])
            parent = self.state.items[parent].parent_id

    def _child(self, parent: str, name: str) -> Item | None:
        for item in self.state.items.values():
            if item.parent_id == parent and item.name == name and not item.deleted:
                return item
        return None

    def _new_id(self) -> str:
        return f"01ITEM{next(self._ids):06d}"

    def path_of(self, item: Item) -> str:
        names = []
        parent = item.parent_id
        while parent is not None and parent != ROOT_ID:
            names.append(self.state.items[parent].name)
            parent = self.state.items[parent].parent_id
        return "/drive/root:" + "".join("/" + n for n in reversed(names))

    # --- knobs for tests --------------------------------------------------------

    def forget_delta_tokens(self) -> None:
        """Every delta and next link handed out so far answers 410 from now on."""
        with self.lock:
            self.state.forgotten_before = self.state.seq
            self.state.listings.clear()

    def fail_next(
        self, count: int, *, status: int = 429, retry_after: int = 1, only: str = ""
    ) -> None:
        """The next `count` Graph calls (whose path has `only` in it, if given) fail."""
        with self.lock:
            self.state.failures.extend([(status, retry_after, only)] * count)

    def before_next(self, part: str, change: Callable[[], None]) -> None:
        """Make `change` to the drive just before the next call whose path has `part` in
        it is answered (the drive changing between two calls of one sync)."""
        with self.lock:
            self.state.before_call.append((part, change))

    def revoke_consent(self) -> None:
        with self.lock:
            self.state.consent_revoked = True
            self.state.refresh_tokens.clear()
            self.state.access_tokens.clear()

    def expire_access_tokens(self) -> None:
        with self.lock:
            for token in self.state.access_tokens:
                self.state.access_tokens[token] = 0

    def grant_code(self, *, code_challenge: str, redirect_uri: str, scope: str) -> str:
        """The code the authorize page hands out after a person consents."""
        code = "code-" + secrets.token_urlsafe(12)
        with self.lock:
            self.state.codes[code] = Grant(code_challenge, redirect_uri, scope)
        return code

    def issue_tokens(self, *, expires_in: int | None = None) -> dict:
        """A token answer as if a person had connected (for tests that start connected)."""
        with self.lock:
            return self._token_answer(expires_in)

    def notify(self, subscription_id: str, *, client_state: str | None = None) -> int:
        """POST a change notification for the subscription to its notificationUrl, as
        Graph does; the status it was answered with."""
        sub = self.state.subscriptions[subscription_id]
        body = {
            "value": [
                {
                    "subscriptionId": sub.id,
                    "clientState": sub.client_state if client_state is None else client_state,
                    "changeType": "updated",
                    "resource": sub.resource,
                    "subscriptionExpirationDateTime": _iso(sub.expires),
                    "tenantId": self.tenant,
                    "resourceData": None,
                }
            ]
        }
        target = urllib.parse.urlsplit(sub.notification_url)
        # Plain http.client: a burst measures the endpoint, not the test's HTTP library.
        connection = http.client.HTTPConnection(target.hostname, target.port, timeout=10)
        try:
            connection.request(
                "POST",
                target.path + (f"?{target.query}" if target.query else ""),
                body=json.dumps(body),
                headers={"Content-Type": "application/json"},
            )
            answer = connection.getresponse()
            answer.read()
            return answer.status
        finally:
            connection.close()

    # --- serving ------------------------------------------------------------------

    def _token_answer(self, expires_in: int | None) -> dict:
        access = "at-" + secrets.token_urlsafe(16)
        refresh = "rt-" + secrets.token_urlsafe(16)
        seconds = self.state.access_token_seconds if expires_in is None else expires_in
        self.state.access_tokens[access] = time.time() + seconds
        self.state.refresh_tokens.add(refresh)
        return {
            "token_type": "Bearer",
            "scope": "Files.Read",
            "expires_in": seconds,
            "access_token": access,
            "refresh_token": refresh,
        }

    def _download_url(self, item: Item) -> str:
        expires = int(time.time()) + self.state.download_seconds
        message = f"{item.id}:{item.content_rev}:{expires}".encode()
        sig = hmac.new(self._signing_key, message, hashlib.sha256).hexdigest()[:32]
        query = urllib.parse.urlencode({"rev": item.content_rev, "exp": expires, "sig": sig})
        return f"{self.state.download_origin or self.url}/download/{item.id}?{query}"

    def item_json(self, item: Item, *, in_delta: bool = False, select: str = "") -> dict:
        if item.deleted:
            gone: dict = {"id": item.id, "parentReference": {"driveId": DRIVE_ID}, "deleted": {}}
            if item.is_folder:
                gone["folder"] = {}
            return gone
        parent: dict = {"driveId": DRIVE_ID, "driveType": self.state.drive_type}
        if item.parent_id is not None:
            parent["id"] = item.parent_id
            if not in_delta:
                # Delta leaves parentReference.path out; a plain GET gives it.
                parent["path"] = self.path_of(item)
        data: dict = {
            "id": item.id,
            "name": item.name,
            "eTag": item.etag,
            "cTag": item.ctag,
            "size": len(item.content),
            "lastModifiedDateTime": "2026-01-01T00:00:00Z",
            "parentReference": parent,
        }
        if in_delta and self.state.drive_type == "business":
            del data["cTag"]
        if item.id == ROOT_ID:
            data["root"] = {}
        if item.is_folder:
            children = [
                i for i in self.state.items.values() if i.parent_id == item.id and not i.deleted
            ]
            data["folder"] = {"childCount": len(children)}
        else:
            # A content hash in quickXorHash's place (base64, changes with the bytes only).
            digest = base64.b64encode(hashlib.sha1(item.content).digest()).decode()
            data["file"] = {"mimeType": item.mime, "hashes": {"quickXorHash": digest}}
        if select:
            wanted = set(select.split(","))
            if "@microsoft.graph.downloadUrl" in wanted and not item.is_folder:
                data["@microsoft.graph.downloadUrl"] = self._download_url(item)
            data = {k: v for k, v in data.items() if k in wanted}
        elif not item.is_folder:
            data["@microsoft.graph.downloadUrl"] = self._download_url(item)
        return data

    def delta_page(self, token: str | None, page: str | None) -> tuple[int, dict, dict]:
        """(status, body, headers) for a delta call."""
        state = self.state
        if page is not None:
            listing = state.listings.get(page.rpartition(":")[0])
            if listing is None:
                return _gone(self, "resyncRequired")
            offset = int(page.rpartition(":")[2])
        else:
            since = 0 if token is None else _token_seq(token)
            if since is None:
                return 400, _error("invalidRequest", "The delta token is not valid."), {}
            if token is not None and since <= state.forgotten_before:
                return _gone(self, "resyncChangesApplyDifferences")
            changed = sorted(
                (
                    i
                    for i in state.items.values()
                    if i.seq > since and i.id != ROOT_ID and not (since == 0 and i.deleted)
                ),
                key=lambda i: i.seq,
            )
            ids = [i.id for i in changed]
            if since == 0:
                # A fresh enumeration starts with the root, as Graph's does.
                ids.insert(0, ROOT_ID)
            for repeated in state.repeat:
                if repeated in ids:
                    ids.append(repeated)
            listing = Listing(items=ids, end_seq=state.seq)
            key = secrets.token_urlsafe(8)
            state.listings[key] = listing
            page = f"{key}:0"
            offset = 0
        key = page.rpartition(":")[0]
        listing = state.listings[key]
        chunk = listing.items[offset : offset + state.page_size]
        body: dict = {
            "@odata.context": f"{self.graph_url}/$metadata#Collection(driveItem)",
            "value": [self.item_json(state.items[i], in_delta=True) for i in chunk],
        }
        if offset + state.page_size < len(listing.items):
            nxt = urllib.parse.quote(f"{key}:{offset + state.page_size}")
            body["@odata.nextLink"] = f"{self.graph_url}/drives/{DRIVE_ID}/root/delta?page={nxt}"
        else:
            state.listings.pop(key, None)
            body["@odata.deltaLink"] = (
                f"{self.graph_url}/drives/{DRIVE_ID}/root/delta?token={_seq_token(listing.end_seq)}"
            )
        return 200, body, {}

    def children_page(self, folder: Item, query: dict) -> dict:
        """One page of a folder's children, by name; `$top` (at most the drive's page
        size) a page, the rest behind an `@odata.nextLink` carrying a `$skiptoken`."""
        children = sorted(
            (i for i in self.state.items.values() if i.parent_id == folder.id and not i.deleted),
            key=lambda i: i.name,
        )
        size = min(int(query.get("$top") or self.state.page_size), self.state.page_size)
        offset = int(query.get("$skiptoken") or 0)
        select = query.get("$select", "")
        body: dict = {
            "value": [self.item_json(i, select=select) for i in children[offset : offset + size]]
        }
        if offset + size < len(children):
            rest = urllib.parse.urlencode({**query, "$skiptoken": offset + size})
            body["@odata.nextLink"] = (
                f"{self.graph_url}/drives/{DRIVE_ID}/items/{folder.id}/children?{rest}"
            )
        return body


def _seq_token(seq: int) -> str:
    return base64.urlsafe_b64encode(f"seq={seq}".encode()).decode().rstrip("=")


def _token_seq(token: str) -> int | None:
    if token == "latest":
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        return int(raw.removeprefix("seq="))
    except ValueError:
        return None


def _gone(server: GraphServer, code: str) -> tuple[int, dict, dict]:
    fresh = f"{server.graph_url}/drives/{DRIVE_ID}/root/delta"
    body = _error(code, "Resync required. Replace any local items with the server's version.")
    return 410, body, {"Location": fresh}


def _error(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": message}}


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f0Z")


def _parse_iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# Graph's documented maximum for driveItem subscriptions.
MAX_SUBSCRIPTION_MINUTES = 42_300


def _handler(server: GraphServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # noqa: A002 - the base class's name
            pass

        def _send(self, status: int, body=None, headers: dict | None = None) -> None:
            raw = b""
            if isinstance(body, bytes):
                raw = body
            elif body is not None:
                raw = json.dumps(body).encode()
            self.send_response(status)
            if body is not None and not isinstance(body, bytes):
                self.send_header("Content-Type", "application/json")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def do_GET(self):  # noqa: N802 - the base class's name
            self._route("GET")

        def do_POST(self):  # noqa: N802
            self._route("POST")

        def do_PATCH(self):  # noqa: N802
            self._route("PATCH")

        def do_DELETE(self):  # noqa: N802
            self._route("DELETE")

        def _route(self, method: str) -> None:
            parsed = urllib.parse.urlsplit(self.path)
            query = dict(urllib.parse.parse_qsl(parsed.query))
            path = parsed.path
            with server.lock:
                server.state.requests.append((method, self.path))
                due = next((c for c in server.state.before_call if c[0] in path), None)
                if due is not None:
                    server.state.before_call.remove(due)
                    due[1]()
            if path.startswith(f"/{server.tenant}/oauth2/v2.0/"):
                return self._identity(method, path.rsplit("/", 1)[1], query)
            if path.startswith("/download/"):
                return self._download(path.removeprefix("/download/"), query)
            if not path.startswith("/v1.0/"):
                return self._send(404, _error("itemNotFound", "No such endpoint."))
            with server.lock:
                failure = next((f for f in server.state.failures if f[2] in path), None)
                if failure is not None:
                    server.state.failures.remove(failure)
                    status, retry_after, _ = failure
                    code = "activityLimitReached" if status == 429 else "serviceNotAvailable"
                    return self._send(
                        status, _error(code, "Try again later."), {"Retry-After": str(retry_after)}
                    )
                auth = self.headers.get("Authorization", "")
                token = auth.removeprefix("Bearer ")
                expiry = server.state.access_tokens.get(token)
                if expiry is None or expiry < time.time():
                    return self._send(
                        401,
                        _error("InvalidAuthenticationToken", "Access token has expired."),
                        {"WWW-Authenticate": 'Bearer error="invalid_token"'},
                    )
                return self._graph(method, path.removeprefix("/v1.0"), query)

        def _graph(self, method: str, path: str, query: dict) -> None:
            state = server.state
            drive = f"/drives/{DRIVE_ID}"
            if method == "GET" and path == "/me/drive":
                return self._send(200, {"id": DRIVE_ID, "driveType": server.state.drive_type})
            if method == "GET" and path == f"{drive}/root/delta":
                status, body, headers = server.delta_page(query.get("token"), query.get("page"))
                return self._send(status, body, headers)
            if method == "GET" and path == f"{drive}/root":
                root = state.items[ROOT_ID]
                return self._send(200, server.item_json(root, select=query.get("$select", "")))
            if method == "GET" and path.startswith(f"{drive}/root:"):
                rel = urllib.parse.unquote(path.removeprefix(f"{drive}/root:")).rstrip(":")
                item = state.items[ROOT_ID]
                for name in [p for p in rel.split("/") if p]:
                    item = server._child(item.id, name)
                    if item is None:
                        return self._send(404, _error("itemNotFound", "The item was not found."))
                return self._send(200, server.item_json(item, select=query.get("$select", "")))
            if method == "GET" and path.startswith(f"{drive}/items/"):
                rest = path.removeprefix(f"{drive}/items/")
                item_id, _, tail = rest.partition("/")
                item = state.items.get(item_id)
                if item is None or item.deleted:
                    return self._send(404, _error("itemNotFound", "The item was not found."))
                if tail == "content":
                    return self._send(302, None, {"Location": server._download_url(item)})
                if tail == "children":
                    return self._send(200, server.children_page(item, query))
                return self._send(200, server.item_json(item, select=query.get("$select", "")))
            if path == "/subscriptions" and method == "POST":
                return self._subscription_create(json.loads(self._body() or b"{}"))
            if path.startswith("/subscriptions/"):
                sub_id = path.removeprefix("/subscriptions/")
                sub = state.subscriptions.get(sub_id)
                if sub is None:
                    return self._send(404, _error("ResourceNotFound", "The object was not found."))
                if method == "PATCH":
                    wanted = _parse_iso(json.loads(self._body())["expirationDateTime"])
                    if not self._expiry_allowed(wanted):
                        return self._send(400, _error("InvalidRequest", "Expiry too far."))
                    sub.expires = wanted
                    return self._send(200, self._subscription_json(sub))
                if method == "DELETE":
                    del state.subscriptions[sub_id]
                    return self._send(204)
            return self._send(400, _error("invalidRequest", f"Unsupported: {method} {path}"))

        def _expiry_allowed(self, wanted: datetime) -> bool:
            now = datetime.now(UTC)
            return now < wanted <= now + timedelta(minutes=MAX_SUBSCRIPTION_MINUTES)

        def _subscription_json(self, sub: Subscription) -> dict:
            return {
                "id": sub.id,
                "resource": sub.resource,
                "changeType": sub.change_type,
                "notificationUrl": sub.notification_url,
                "expirationDateTime": _iso(sub.expires),
                "clientState": sub.client_state,
            }

        def _subscription_create(self, body: dict) -> None:
            required = ("changeType", "notificationUrl", "resource", "expirationDateTime")
            if any(not body.get(k) for k in required):
                return self._send(400, _error("InvalidRequest", "A required field is missing."))
            if body["changeType"] != "updated":
                # driveItem supports only "updated".
                return self._send(400, _error("InvalidRequest", "Unsupported changeType."))
            if len(body.get("clientState", "")) > 128:
                return self._send(400, _error("InvalidRequest", "clientState is too long."))
            expires = _parse_iso(body["expirationDateTime"])
            if not self._expiry_allowed(expires):
                return self._send(400, _error("InvalidRequest", "Expiry too far."))
            if server.state.validate_notification_url:
                # Graph checks the endpoint echoes a validation token within 10 seconds.
                token = "validation-" + secrets.token_urlsafe(8)
                url = body["notificationUrl"]
                sep = "&" if "?" in url else "?"
                try:
                    answer = httpx.post(
                        f"{url}{sep}validationToken={urllib.parse.quote(token)}", timeout=10
                    )
                except httpx.HTTPError:
                    answer = None
                if (
                    answer is None
                    or answer.status_code != 200
                    or answer.text != token
                    or not answer.headers.get("content-type", "").startswith("text/plain")
                ):
                    return self._send(
                        400,
                        _error(
                            "InvalidRequest",
                            "Subscription validation request failed. Notification endpoint "
                            "must respond with 200 OK to validation request.",
                        ),
                    )
            sub = Subscription(
                id=secrets.token_hex(8),
                resource=body["resource"],
                notification_url=body["notificationUrl"],
                client_state=body.get("clientState", ""),
                expires=expires,
                change_type=body["changeType"],
            )
            with server.lock:
                server.state.subscriptions[sub.id] = sub
            return self._send(201, self._subscription_json(sub))

        def _identity(self, method: str, endpoint: str, query: dict) -> None:
            if endpoint == "authorize" and method == "GET":
                if query.get("client_id") != server.client_id:
                    return self._send(400, b"unknown client")
                if query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
                    return self._send(400, b"PKCE required")
                # The person signs in and consents at once; back to the app with a code.
                code = server.grant_code(
                    code_challenge=query["code_challenge"],
                    redirect_uri=query["redirect_uri"],
                    scope=query.get("scope", ""),
                )
                target = (
                    query["redirect_uri"]
                    + "?"
                    + urllib.parse.urlencode({"code": code, "state": query.get("state", "")})
                )
                return self._send(302, b"", {"Location": target})
            if endpoint != "token" or method != "POST":
                return self._send(404, b"")
            form = dict(urllib.parse.parse_qsl(self._body().decode()))
            with server.lock:
                server.state.token_grants.append(form.get("grant_type", ""))
                if (
                    form.get("client_id") != server.client_id
                    or form.get("client_secret") != server.client_secret
                ):
                    return self._send(
                        401, {"error": "invalid_client", "error_description": "AADSTS7000215"}
                    )
                grant = form.get("grant_type")
                if grant == "authorization_code":
                    issued = server.state.codes.pop(form.get("code", ""), None)
                    verifier = form.get("code_verifier", "")
                    challenge = (
                        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
                        .decode()
                        .rstrip("=")
                    )
                    if (
                        issued is None
                        or issued.redirect_uri != form.get("redirect_uri")
                        or issued.code_challenge != challenge
                    ):
                        return self._send(
                            400,
                            {
                                "error": "invalid_grant",
                                "error_description": "AADSTS70008: bad code",
                            },
                        )
                    return self._send(200, server._token_answer(None))
                if grant == "refresh_token":
                    refresh = form.get("refresh_token", "")
                    if server.state.consent_revoked or refresh not in server.state.refresh_tokens:
                        return self._send(
                            400,
                            {
                                "error": "invalid_grant",
                                "error_description": "AADSTS65001: The user or administrator "
                                "has not consented to use the application.",
                            },
                        )
                    # Microsoft rotates refresh tokens: the answer carries a new one.
                    server.state.refresh_tokens.discard(refresh)
                    return self._send(200, server._token_answer(None))
                return self._send(400, {"error": "unsupported_grant_type"})

        def _download(self, item_id: str, query: dict) -> None:
            with server.lock:
                item = server.state.items.get(item_id)
                expected = ""
                if item is not None:
                    message = f"{item.id}:{query.get('rev')}:{query.get('exp')}".encode()
                    expected = hmac.new(server._signing_key, message, hashlib.sha256).hexdigest()
                if (
                    item is None
                    or item.deleted
                    or not hmac.compare_digest(expected[:32], query.get("sig", ""))
                    or int(query.get("exp", 0)) < time.time()
                    or str(item.content_rev) != query.get("rev")
                ):
                    # Pre-authenticated URLs are short-lived and for one content version.
                    return self._send(401, b"expired or invalid download URL")
                content = item.content
            return self._send(200, content, {"Content-Type": "application/octet-stream"})

    return Handler


def graph_settings(graph: GraphServer) -> dict[str, object]:
    """The PAPERLANE_ONEDRIVE_* settings (and their environment form) for this server."""
    return {
        "PAPERLANE_ONEDRIVE_CLIENT_ID": graph.client_id,
        "PAPERLANE_ONEDRIVE_CLIENT_SECRET": graph.client_secret,
        "PAPERLANE_ONEDRIVE_TENANT": graph.tenant,
        "PAPERLANE_ONEDRIVE_GRAPH_URL": graph.graph_url,
        "PAPERLANE_ONEDRIVE_LOGIN_URL": graph.url,
        # Its download URLs are on its own (plain HTTP) address.
        "PAPERLANE_ONEDRIVE_DOWNLOAD_HOSTS": [graph.url],
    }


def graph_env(graph: GraphServer) -> dict[str, str]:
    """The same settings as environment variables, for a child process."""
    return {
        name: ",".join(value) if isinstance(value, list) else str(value)
        for name, value in graph_settings(graph).items()
    }


def graph_fixture():
    """The `graph` fixture a OneDrive test module binds with `graph = graph_fixture()`:
    a GraphServer for one test, with the test's settings pointed at it."""

    @pytest.fixture
    def graph(settings):
        with GraphServer() as server:
            for name, value in graph_settings(server).items():
                setattr(settings, name, value)
            yield server

    return graph
