"""Listings handed to a process are used instead of listing again; others are listed."""

from __future__ import annotations

from raypipe.storage import listings


def test_a_given_listing_is_used_and_others_are_listed():
    made = []

    def make():
        made.append(1)
        return (["s3://b/x"], [0], [1])

    try:
        listings.install({("readers.file", "s3://b/given"): (["s3://b/given/a"], [0], None)})
        assert listings.listed(("readers.file", "s3://b/given"), make)[0] == ["s3://b/given/a"] and not made
        assert listings.listed(("readers.file", "s3://b/other"), make)[0] == ["s3://b/x"] and made == [1]
    finally:
        listings.forget()
    assert listings.listed(("readers.file", "s3://b/given"), make)[0] == ["s3://b/x"] and made == [1, 1]
