"""The Chromium fixtures of the recipient page tests, for the campaign page."""

from tests.pages.test_pages_browser import browser, page  # noqa: F401  (fixtures, used by name)
