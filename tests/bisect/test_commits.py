"""The ends of a step checked, and the first-parent line between them (the refusals through the command line are in
test_bisect_command.py)."""

import bisect_histories as histories
import pytest

from sgemm.bisect.commits import RangeError, check_ends, first_parent_chain, subject

KERNEL = "fp32/warptile"


@pytest.fixture
def make_history(tmp_path):
    return lambda *args, **kwargs: histories.make_history(tmp_path, *args, **kwargs)


def test_the_ends_resolve_to_full_hashes_and_the_bad_ends_entry(make_history):
    history = make_history(3)
    good, bad, kernel = check_ends(history.path, history.commits[0][:10], "HEAD", KERNEL, 4096)
    assert (good, bad) == (history.commits[0], history.commits[-1])
    assert kernel.name == KERNEL and str(kernel.kernel_dir) != ""


def test_the_chain_is_every_commit_after_good_up_to_bad(make_history):
    history = make_history(5)
    chain = first_parent_chain(history.path, history.commits[1], history.commits[5])
    assert chain.commits == tuple(history.commits[2:6]) and chain.bad == history.commits[5] and not chain.merges
    assert subject(history.path, chain.commits[0]) == "change 2"


def test_a_catalogue_that_cannot_be_read_at_an_end_is_refused(make_history):
    history = make_history(1)
    history.commit("break it", lambda repo: (repo / "sgemm" / "catalogue.toml").write_text("[[kernel]\n"))
    with pytest.raises(RangeError, match="bad end .*catalogue"):
        check_ends(history.path, history.commits[0], history.commits[-1], KERNEL, 4096)
