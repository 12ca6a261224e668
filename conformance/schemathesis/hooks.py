"""A Schemathesis check of the contract's headers on every response."""

import schemathesis


@schemathesis.check
def no_store_and_request_id(ctx, response, case):
    headers = {k.lower(): v for k, v in response.headers.items()}
    cache = headers.get("cache-control", [""])
    cache = cache[0] if isinstance(cache, list) else cache
    if cache != "no-store":
        raise AssertionError(f"Cache-Control is {cache!r}, not no-store")
    if not headers.get("x-request-id"):
        raise AssertionError("no X-Request-Id")
