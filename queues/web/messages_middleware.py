"""Django's message middleware, building the message storage only when something uses it.

The stock middleware builds a cookie-and-session storage (a signer included) on every request
and asks it to save after every response. API requests never read or add a message, so that was
pure overhead on the hot path; here the storage is made on first use, and a response whose
request never touched it has nothing to save, exactly as the stock storage would decide.
"""

from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.messages.storage import default_storage
from django.http import HttpRequest, HttpResponseBase
from django.utils.functional import SimpleLazyObject, empty


class LazyMessageMiddleware(MessageMiddleware):
    def process_request(self, request: HttpRequest) -> None:
        request._messages = SimpleLazyObject(lambda: default_storage(request))  # type: ignore[attr-defined]

    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        messages = getattr(request, "_messages", None)
        if isinstance(messages, SimpleLazyObject) and messages._wrapped is empty:
            return response  # never read nor added to: the storage would store nothing
        return super().process_response(request, response)
