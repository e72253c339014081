"""Listing the stored keys in key order from a resume point (local storage here; S3 in
test_s3_storage.py), as the orphan walk goes on from where its last pass stopped."""

import pytest

from documents.storage import stored_keys
from tests.support.storage import KEYS, store_keys


@pytest.mark.parametrize(
    "after",
    ["", "top/a-b", "top/a/b/c", "top/a/b/cc", "top/a/", "top/a/z", "top/a0", "top/b/c", "top/0"],
)
def test_keys_are_listed_in_key_order_after_the_resume_point(after):
    store_keys(KEYS)

    assert KEYS == sorted(KEYS)
    assert list(stored_keys(under="top", after=after)) == [k for k in KEYS if k > after]


def test_a_folder_that_does_not_exist_lists_nothing():
    assert list(stored_keys(under="nowhere", after="nowhere/a")) == []
