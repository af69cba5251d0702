"""The refusal every client call raises: `ApiError`, with api.md's status, code and detail."""

from __future__ import annotations


class ApiError(Exception):
    """The server refused a request: `status`, api.md's `code`, and its `detail` sentence;
    `index`, for a refusal of a batch, is the entry it is about (None otherwise)."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        headers: dict[str, str] | None = None,
        index: int | None = None,
    ) -> None:
        self.status, self.code, self.detail, self.index = status, code, detail, index
        self.headers = headers or {}
        super().__init__(f"{status} {code}: {detail}")
