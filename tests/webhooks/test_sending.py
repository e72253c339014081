"""One try of a webhook against real sockets on loopback: what is refused before a
connection is made, what is not followed, and how long a silent receiver may hold it."""

import time

import pytest

from tests.support.receiver import Hang, Redirect, receiver
from webhooks.sending import address_allowed, networks_parse, webhook_post

LOOPBACK = networks_parse(["127.0.0.0/8"])


def post(url, allowed=(), total=5.0):
    return webhook_post(
        url=url,
        body=b"{}",
        headers={},
        allowed=list(allowed),
        connect_seconds=2,
        total_seconds=total,
    )


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.9",
        "192.168.1.1",
        "169.254.169.254",  # the cloud metadata service
        "100.64.0.1",  # shared address space
        "0.0.0.0",
        "::1",
        "fe80::1",
        "fd00:ec2::254",  # AWS's IPv6 metadata service
        "::ffff:127.0.0.1",  # loopback written as IPv6
        "224.0.0.1",
    ],
)
def test_it_refuses_private_loopback_link_local_and_metadata_addresses(address):
    assert not address_allowed(address, [])


def test_it_allows_public_addresses_and_the_networks_an_operator_names():
    assert address_allowed("93.184.216.34", [])
    assert address_allowed("2606:2800:220:1::1", [])
    assert address_allowed("127.0.0.1", LOOPBACK)
    assert not address_allowed("10.0.0.1", LOOPBACK)


def test_a_loopback_receiver_gets_nothing_without_the_setting():
    with receiver(200) as (url, script):
        answer = post(url)
        secure = post(url.replace("http://", "https://"))
    assert not answer.delivered and "private or reserved address" in answer.error
    assert "PAPERLANE_WEBHOOK_ALLOWED_NETWORKS" in answer.error
    assert "private or reserved address" in secure.error
    assert script.received == []


def test_a_name_that_resolves_to_loopback_is_refused_too():
    with receiver(200) as (url, script):
        answer = post(url.replace("127.0.0.1", "localhost"))
    assert "private or reserved address" in answer.error
    assert script.received == []


def test_an_allowed_network_gets_its_webhook():
    with receiver(204) as (url, script):
        answer = post(url, allowed=LOOPBACK)
    assert answer.delivered and answer.status_code == 204
    assert len(script.received) == 1


def test_plain_http_goes_only_to_allowed_networks():
    # A public address over plain HTTP is refused before any connection is tried.
    answer = post("http://93.184.216.34/hook")
    assert "plain HTTP" in answer.error


def test_a_redirect_is_not_followed():
    with receiver(200) as (elsewhere, other), receiver(Redirect(elsewhere)) as (url, script):
        answer = post(url, allowed=LOOPBACK)
    assert answer.status_code == 302 and not answer.delivered
    assert len(script.received) == 1
    assert other.received == []


def test_a_receiver_that_never_answers_holds_the_try_no_longer_than_its_limit():
    with receiver(Hang(30)) as (url, _):
        started = time.monotonic()
        answer = post(url, allowed=LOOPBACK, total=1.5)
        took = time.monotonic() - started
    assert not answer.delivered and "within 1.5 s" in answer.error
    assert took < 3


def test_a_long_answer_is_read_to_a_bound_and_shown_as_a_short_excerpt():
    with receiver(200) as (url, _):
        answer = post(url, allowed=LOOPBACK)
    assert answer.excerpt == "answer 200"
