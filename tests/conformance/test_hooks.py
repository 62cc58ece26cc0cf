"""Checks of the conformance hooks themselves (scripts/conformance.sh runs them before the run)."""

import types
import unittest

import hooks


def _case(headers):
    return types.SimpleNamespace(headers=headers)


class HeaderFilter(unittest.TestCase):
    # cargo lambda watch answers a header value outside visible ASCII with its own 500 before any
    # function runs; every phase must leave such cases out, the coverage phase too (it runs
    # `filter_case`, never `filter_headers`).
    def test_cases_with_invisible_header_values_are_left_out_in_every_phase(self):
        for value in ["Bearer \xff\xfe", "\x80abc", "é", b"\xe9"]:
            self.assertFalse(hooks.filter_case(None, _case({"Authorization": value})), value)
            self.assertFalse(hooks.filter_headers(None, {"If-None-Match": value}), value)

    def test_cases_with_visible_header_values_are_kept(self):
        for headers in [None, {}, {"Authorization": "Bearer abc.def", "x-roles": ""}]:
            self.assertTrue(hooks.filter_case(None, _case(headers)), headers)


class EmulatorFailure(unittest.TestCase):
    # Only cargo lambda watch's own problem document is sent again; a 500 of ours never is.
    def test_the_emulators_own_500_is_recognised(self):
        body = b'{"type":"https://httpstatuses.com/500","status":500,"title":"Internal Server Error"}'
        self.assertTrue(hooks._is_emulator_failure(500, body))

    def test_our_own_answers_are_not(self):
        ours = b'{"type":"urn:cqrs:problem:internal","title":"Internal error","status":500}'
        self.assertFalse(hooks._is_emulator_failure(500, ours))
        self.assertFalse(hooks._is_emulator_failure(200, b'{"type":"https://httpstatuses.com/500"}'))
        self.assertFalse(hooks._is_emulator_failure(500, b""))


if __name__ == "__main__":
    unittest.main()
