"""Where a webhook may point: http(s) on public addresses, refused when saved and again after
resolution just before each call, so nothing is ever sent to a refused address."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from queues import stores
from webhooks.addresses import RefusedAddress, check_url, refused_reason
from webhooks.models import Delivery, Notification, Webhook
from webhooks.notifying import notify
from webhooks.sending import post

from .test_notifications import failed_task

pytestmark = pytest.mark.django_db

REFUSED_ALWAYS = [
    ("ftp://files.example.com/x", "Only http and https"),
    ("file:///etc/passwd", "Only http and https"),
    ("gopher://127.0.0.1/", "Only http and https"),
    ("example.com/hook", "Only http and https"),
    ("http:///hook", "names no host"),
    ("http://user:secret@93.184.215.14/", "no user name or password"),
    ("http://93.184.215.14:99999/", "Not a URL"),
    ("http://0.0.0.0:8000/", "is not a host's address"),
    ("http://224.0.0.1/", "is not a host's address"),
]
REFUSED_UNLESS_ALLOWED = [
    ("http://10.0.0.1/hook", "10.0.0.1 is a private or reserved address"),
    ("http://192.168.1.20:8080/", "private or reserved"),
    ("http://172.16.5.4/", "private or reserved"),
    ("http://100.64.0.1/", "private or reserved"),
    ("http://127.0.0.1:8000/", "127.0.0.1 is a loopback address"),
    ("http://localhost/hook", "127.0.0.1 is a loopback address"),
    ("http://[::1]/", "::1 is a loopback address"),
    ("http://[::ffff:10.0.0.1]/", "10.0.0.1 is a private or reserved address"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    # IPv6 forms that carry an IPv4 address, refused as the address inside would be
    ("http://[64:ff9b::7f00:1]/", "127.0.0.1 is a loopback address (64:ff9b::7f00:1 is its NAT64"),
    ("http://[2002:7f00:1::]/", "127.0.0.1 is a loopback address (2002:7f00:1:: is its 6to4"),
    ("http://[::127.0.0.1]/", "127.0.0.1 is a loopback address (::127.0.0.1 is its IPv4-compat"),
    (
        "http://[::ffff:0:7f00:1]/",
        "127.0.0.1 is a loopback address (::ffff:0:7f00:1 is its IPv4-tr",
    ),
    ("http://[::ffff:169.254.169.254]/", "169.254.169.254 is a link-local address"),
    ("http://[64:ff9b::a9fe:a9fe]/latest/", "169.254.169.254 is a link-local address"),
    ("http://[64:ff9b:1::a00:1]/", "10.0.0.1 is a private or reserved address (64:ff9b:1::a00:1"),
    ("http://[64:ff9b:1:ab::1]/", "is a local-use NAT64 address"),
    ("http://[2002:c0a8:114::1]/", "192.168.1.20 is a private or reserved address"),
]


def saved(queue, url: str) -> Webhook:
    hook = Webhook(queue=queue, url=url)
    hook.full_clean()
    hook.save()
    return hook


@pytest.mark.parametrize(("url", "reason"), REFUSED_ALWAYS + REFUSED_UNLESS_ALLOWED)
def test_a_refused_url_is_refused_at_save(make_queue, url, reason):
    with pytest.raises(ValidationError) as refused:
        saved(make_queue(), url)
    assert reason in " ".join(refused.value.messages)
    assert not Webhook.objects.exists()


@pytest.mark.parametrize(("url", "reason"), REFUSED_ALWAYS)
def test_the_allowance_never_lets_another_scheme_or_a_non_host_through(
    make_queue, allow_private, url, reason
):
    with pytest.raises(ValidationError, match=reason):
        saved(make_queue(), url)


@pytest.mark.parametrize(("url", "_"), REFUSED_UNLESS_ALLOWED)
def test_the_allowance_lets_private_and_loopback_addresses_be_saved(
    make_queue, allow_private, url, _
):
    saved(make_queue(), url)


def test_a_public_address_is_saved(make_queue):
    assert saved(make_queue(), "https://93.184.215.14/hooks/taskhoster").secret


def test_an_address_is_refused_before_any_connection(receiver):
    # Only loopback is ever a target here: a broken check must not send a packet elsewhere.
    answer = post(receiver.url, b"{}", {}, allow_private=False)
    assert answer.status is None
    assert answer.error.startswith("refused: 127.0.0.1 is refused: 127.0.0.1 is a loopback")
    assert receiver.connections == 0
    assert post(receiver.url, b"{}", {}, allow_private=True).status == 200
    assert receiver.connections == 1
    with pytest.raises(RefusedAddress, match="loopback"):
        check_url("http://localhost:9/", allow_private=False, must_resolve=True)
    with pytest.raises(RefusedAddress, match="private"):
        check_url("http://10.0.0.1:9/", allow_private=False, must_resolve=True)


def test_refused_reason_knows_the_ranges():
    assert refused_reason("93.184.215.14", allow_private=False) is None
    assert refused_reason("2606:4700::1111", allow_private=False) is None
    assert (
        refused_reason("fd00::1", allow_private=False) == "fd00::1 is a private or reserved address"
    )
    assert refused_reason("fe80::1%eth0", allow_private=False) == "fe80::1 is a link-local address"
    assert refused_reason("10.1.2.3", allow_private=True) is None


@pytest.mark.parametrize(
    "address",
    ["64:ff9b::5db8:d70e", "64:ff9b:1::5db8:d70e", "2002:5db8:d70e::1", "::ffff:93.184.215.14",
     "::ffff:0:5db8:d70e", "::93.184.215.14"],
)  # fmt: skip
def test_an_ipv6_form_of_a_public_ipv4_address_is_allowed(address):
    assert refused_reason(address, allow_private=False) is None


@pytest.mark.parametrize("address", ["64:ff9b::e000:1", "::ffff:0:0", "2002:e000:1::"])
def test_an_ipv6_form_of_a_multicast_or_unspecified_address_is_refused_even_when_allowed(address):
    assert "is not a host's address" in refused_reason(address, allow_private=True)


def test_a_url_saved_when_allowed_is_refused_at_send_once_disallowed(
    hooked_queue, receiver, settings
):
    failed_task(hooked_queue)
    settings.TASKHOSTER_WEBHOOK_ALLOW_PRIVATE = False
    assert notify(stores.router(), now=timezone.now()).failed == 1
    assert receiver.connections == 0  # refused before any connection to the live receiver
    (delivery,) = Delivery.objects.all()
    assert delivery.status_code is None
    assert "127.0.0.1 is a loopback address" in delivery.error


def test_a_name_that_resolves_to_loopback_at_send_time_is_refused(hooked_queue, receiver, settings):
    # As if the name's DNS record had been changed to point inside after the URL was saved.
    port = receiver.url.split(":")[2].split("/")[0]
    Webhook.objects.update(url=f"http://localhost:{port}/hook")
    failed_task(hooked_queue)
    settings.TASKHOSTER_WEBHOOK_ALLOW_PRIVATE = False
    notify(stores.router(), now=timezone.now())
    assert receiver.connections == 0
    assert "localhost is refused: 127.0.0.1 is a loopback address" in Delivery.objects.get().error
    assert Notification.objects.get().state == "pending"  # tried again later, refused again


def test_a_url_changed_in_the_database_to_ftp_is_never_called(hooked_queue, receiver):
    Webhook.objects.update(url="ftp://127.0.0.1/x")  # bypassing the form's validation
    failed_task(hooked_queue)
    notify(stores.router(), now=timezone.now())
    assert receiver.connections == 0
    assert "Only http and https URLs are called, not ftp" in Delivery.objects.get().error
