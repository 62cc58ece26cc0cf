"""Schemathesis hooks for the API conformance check (scripts/conformance.sh).

cargo lambda watch, the local stand-in for API Gateway, answers a request body that is not valid
UTF-8 with its own 500 before any function runs; API Gateway instead hands such a body to the
function base64-encoded, and the handlers answer it with a 400 (tests/reliability/tests/bad_input.rs
proves that in-process). So bodies that are not UTF-8 are left out here: they would test the
emulator, not the product.
"""

import schemathesis


def _is_utf8(value) -> bool:
    if isinstance(value, (bytes, bytearray)):
        try:
            bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, dict):
        return all(_is_utf8(k) and _is_utf8(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_is_utf8(v) for v in value)
    return True


@schemathesis.hook
def filter_body(ctx, body):
    return _is_utf8(body)
