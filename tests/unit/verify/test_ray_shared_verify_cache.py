"""The verify cache shared by a grid's nodes (claimgrid.verify.cache.SharedResults), as units:
two nodes' caches in one process, each with its own in-memory cache, over one shared store.
A key is tested once whichever node sees it first, a hit names the run that tested it, a
result that is not cacheable is not shared, a lost owner hands its key on at once, and a
store that fails costs a test run, never a result. The same through a real two-node Ray
cluster is tests/grid/execute/test_backend_ray.py."""

from __future__ import annotations

import threading
import time

import pytest

from claimgrid.verify.cache import SharedResults, VerifyCache


def _tests(**extra):
    return {
        "source": "verifier",
        "kind": "tests",
        "command": ["python", "-m", "unittest"],
        "exit_code": 0,
        "passed": True,
        "timed_out": False,
        "guard": "on",
        "output_tail": "OK",
        "duration_s": 0.1,
        **extra,
    }


class Client:
    """What the Ray backend's board client does, without Ray: names its node on every call."""

    def __init__(self, board, node):
        self.board, self.node = board, node

    def claim(self, key, run_id):
        return self.board.claim(key, run_id, self.node)

    def settle(self, key, result, run_id):
        self.board.settle(key, result, run_id, self.node)


def test_one_key_seen_by_two_nodes_at_once_is_tested_once():
    board = SharedResults()
    nodes = [VerifyCache(shared=Client(board, n)) for n in ("a", "b")]
    calls, results, release = [], {}, threading.Event()

    def compute():
        calls.append(1)
        release.wait(5)  # every other run, on both nodes, asks while this one tests
        return _tests()

    threads = [
        threading.Thread(
            target=lambda i=i: results.__setitem__(f"run-{i}", nodes[i % 2].run("same", f"run-{i}", compute))
        )
        for i in range(6)
    ]
    for t in threads:
        t.start()
    time.sleep(0.3)
    release.set()
    for t in threads:
        t.join(10)
    assert len(calls) == 1 and len(results) == 6
    (origin,) = [rid for rid, r in results.items() if r["cache"] == "miss"]
    assert {r["verified_by"] for rid, r in results.items() if rid != origin} == {origin}
    assert all(r["passed"] is True for r in results.values())
    assert board.facts() == {"shared": True, "keys": 1, "test_runs": 1, "hits": 1}  # one node asked the board twice
    # later runs on either node hit their own memory first
    assert nodes[0].run("same", "run-x", lambda: pytest.fail("tested again"))["verified_by"] == origin


def test_a_result_that_is_not_cacheable_is_not_shared():
    board = SharedResults()
    a, b = (VerifyCache(shared=Client(board, n)) for n in ("a", "b"))
    assert a.run("k", "r1", lambda: _tests(exit_code=None, passed=None, timed_out=True))["cache"] == "miss"
    assert b.run("k", "r2", _tests)["cache"] == "miss"
    assert a.run("k", "r3", lambda: pytest.fail("tested again"))["verified_by"] == "r2"
    assert board.facts()["test_runs"] == 2


def test_a_lost_owner_hands_its_key_to_the_node_waiting_for_it():
    board = SharedResults(wait_s=60)
    assert board.claim("k", "r1", "dead") == ("compute", None, None)  # node "dead" tests k, then is lost
    got = []
    t = threading.Thread(target=lambda: got.append(board.claim("k", "r2", "b")))
    t.start()
    t.join(0.2)
    assert t.is_alive()  # waits for the owner's result
    t0 = time.monotonic()
    assert board.forget_node("dead") == 1
    t.join(5)
    assert got == [("compute", None, None)] and time.monotonic() - t0 < 5


def test_a_shared_store_that_fails_costs_a_test_run_not_a_result():
    from claimgrid.execute.ray import _BoardClient

    class Gone:
        def __getattr__(self, name):
            raise RuntimeError("the board's actor died")

    cache = VerifyCache(shared=_BoardClient(Gone(), "a"))
    first = cache.run("k", "r1", _tests)
    assert first["cache"] == "miss" and first["passed"] is True
    assert cache.run("k", "r2", lambda: pytest.fail("tested again"))["verified_by"] == "r1"


def test_a_test_run_that_raises_releases_the_key():
    board = SharedResults(wait_s=60)
    cache = VerifyCache(shared=Client(board, "a"))

    def boom():
        raise OSError("sandbox vanished")

    with pytest.raises(OSError):
        cache.run("k", "r1", boom)
    t0 = time.monotonic()
    assert board.claim("k", "r2", "b") == ("compute", None, None) and time.monotonic() - t0 < 5


def _index(entries, version=2, checksum=b"\x01" * 20):
    """A git index: ``entries`` of (ctime, mtime, dev, ino, oid, path), mode 100644, size 3."""
    out = b"DIRC" + version.to_bytes(4, "big") + len(entries).to_bytes(4, "big")
    for ctime, mtime, dev, ino, oid, path in entries:
        fixed = (
            ctime.to_bytes(8, "big")
            + mtime.to_bytes(8, "big")
            + dev.to_bytes(4, "big")
            + ino.to_bytes(4, "big")
            + (0o100644).to_bytes(4, "big")
            + bytes(8)
            + (3).to_bytes(4, "big")
            + oid
            + len(path).to_bytes(2, "big")
        )
        entry = fixed + path
        out += entry + b"\0" * (8 - len(entry) % 8)
    tree = b"TREE" + (5).to_bytes(4, "big") + b"\0 1 0"
    return out + tree + checksum


def test_a_git_index_keys_by_what_it_stages_not_by_the_files_stat_data():
    """Two builds of one fixture (another node, another second) differ in the index only by
    the times and inodes it caches: the same key. A staged blob of another content does not."""
    from claimgrid.verify.cache import index_content

    one = _index([(1, 2, 3, 4, b"a" * 20, b"src/calc.py"), (1, 2, 3, 5, b"b" * 20, b"tests/test_calc.py")])
    other = _index(
        [(9, 8, 7, 6, b"a" * 20, b"src/calc.py"), (9, 8, 7, 5, b"b" * 20, b"tests/test_calc.py")], checksum=b"\x02" * 20
    )
    staged = _index([(1, 2, 3, 4, b"c" * 20, b"src/calc.py"), (1, 2, 3, 5, b"b" * 20, b"tests/test_calc.py")])
    assert one != other and index_content(one) == index_content(other)
    assert index_content(one) != index_content(staged)
    assert b"src/calc.py" in index_content(one) and b"TREE" in index_content(one)
    for unread in (_index([(1, 2, 3, 4, b"a" * 20, b"x")], version=4), one[:40], b"not an index"):
        assert index_content(unread) == unread  # kept whole: a key of its own, as before
    untracked = one[:-20] + b"UNTR" + (4).to_bytes(4, "big") + b"stat" + one[-20:]  # may hold stat data
    assert index_content(untracked) == untracked
