"""Fixtures of the bisect tests: real git histories made in a temporary folder, and paired rounds stood in for by
chosen ratios (bisect_histories)."""

import bisect_histories as histories
import pytest


@pytest.fixture
def make_history(tmp_path):
    return lambda *args, **kwargs: histories.make_history(tmp_path, *args, **kwargs)


@pytest.fixture
def fake_builds():
    return histories.FakeBuilds
