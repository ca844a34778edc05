"""Embedding shards by several workers: atomic claims, stale claims taken over, one worker per GPU (device
enumeration faked: no GPU here), batch sized to device memory."""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from veracity.indexes import embedding as emb

DIM = 8


class HashEncoder:
    """Deterministic vectors from the text (a stand-in for the sentence encoder); ``delay`` per call."""

    name = "hash"
    dimension = DIM

    def __init__(self, delay: float = 0.0):
        self.delay = delay
        self.calls = 0

    def encode(self, texts, batch_size=64):
        self.calls += 1
        time.sleep(self.delay)
        out = np.array([np.frombuffer(hashlib.sha256(t.encode()).digest()[:DIM * 4],
                                      dtype=np.uint32) for t in texts],
                       dtype=np.float64)
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out.astype(np.float32)


def rows_of(n):
    texts = [(i, f"T{i // 3}", f"passage number {i}") for i in range(n)]
    return lambda a, b: texts[a:b]


def expected(n):
    return HashEncoder().encode([f"{t}\n{x}" for _, t, x in rows_of(n)(0, n)])


def all_vectors(folder, n, shard_size):
    return np.concatenate([np.load(emb.shard_path(folder, i)) for i in range(emb.n_shards(n, shard_size))])


def _worker(folder, n, shard_size, delay, out, counts=None, me=0):
    def on_shard(i):
        """After its first shard a worker waits (up to 30 s) until the other one has embedded a shard too, or
        nothing is left: both work whatever the scheduler does (a loaded machine may start one late)."""
        if counts is None:
            return
        with counts.get_lock():
            counts[me] += 1
        deadline = time.monotonic() + 30
        while counts[1 - me] == 0 and time.monotonic() < deadline and \
                emb.done_passages(folder, n, shard_size) < n:
            time.sleep(0.01)

    got = emb.embed_claimed_shards(rows_of(n), n, folder, HashEncoder(delay), shard_size=shard_size,
                                   batch_size=4,
                                   poll=0.05, on_shard=on_shard)
    out.put((os.getpid(), got))


def test_two_processes_share_one_build_without_doing_a_shard_twice(tmp_path):
    n, shard = 90, 10
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    counts = ctx.Array("i", 2)  # shards embedded by each worker
    procs = [ctx.Process(target=_worker, args=(tmp_path, n, shard, 0.02, out, counts, me)) for me in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    assert sum(got for _, got in results) == n  # every passage embedded exactly once between them
    assert all(got > 0 for _, got in results)   # both worked
    np.testing.assert_array_equal(all_vectors(tmp_path, n, shard), expected(n))
    assert not list(tmp_path.glob("*.claim")) and not list(tmp_path.glob(".*.tmp.npy"))


def test_a_live_claim_is_left_alone_and_a_dead_ones_taken_over(tmp_path):
    live = emb.try_claim(tmp_path, 0)
    assert live is not None and emb.try_claim(tmp_path, 0) is None  # held by this (live) process
    owner = json.loads(emb.claim_path(tmp_path, 0).read_text())
    assert owner["pid"] == os.getpid() and owner["host"] == socket.gethostname()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    emb.claim_path(tmp_path, 1).write_text(json.dumps({"host": socket.gethostname(), "pid": dead.pid,
                                                       "token": "x"}))
    taken = emb.try_claim(tmp_path, 1)
    assert taken is not None and json.loads(taken.path.read_text())["pid"] == os.getpid()
    emb.release(live)
    assert not emb.claim_path(tmp_path, 0).exists()


def test_a_claim_interrupted_while_it_is_made_leaves_no_ownerless_claim(tmp_path, monkeypatch):
    """Ctrl-C at any point of making a claim leaves either no claim or one naming its owner: an empty claim
    (created, then interrupted before its owner was written — seen in CI) has no pid to check and blocked
    the next build for STALE_AFTER_S."""
    real_link = os.link

    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(emb.os, "link", interrupted)
    with pytest.raises(KeyboardInterrupt):
        emb.try_claim(tmp_path, 0)
    assert not emb.claim_path(tmp_path, 0).exists() and not list(tmp_path.iterdir())  # nothing left behind
    monkeypatch.setattr(emb.os, "link", real_link)
    claim = emb.try_claim(tmp_path, 0)  # the next build claims it at once
    assert claim is not None and json.loads(claim.path.read_text())["pid"] == os.getpid()
    assert sorted(p.name for p in tmp_path.iterdir()) == [claim.path.name]  # no private file left


def test_another_hosts_claim_goes_stale_without_heartbeat(tmp_path):
    path = emb.claim_path(tmp_path, 3)
    path.write_text(json.dumps({"host": "elsewhere.example", "pid": 1, "token": "x"}))
    assert not emb.claim_is_stale(path, 600)
    old = time.time() - 601
    os.utime(path, (old, old))
    assert emb.claim_is_stale(path, 600)
    assert emb.try_claim(tmp_path, 3, stale_after=600) is not None


def test_release_keeps_a_claim_someone_took_over(tmp_path):
    mine = emb.try_claim(tmp_path, 0)
    emb.claim_path(tmp_path, 0).write_text(json.dumps({"host": "h", "pid": 2, "token": "theirs"}))
    emb.release(mine)
    assert emb.claim_path(tmp_path, 0).exists()


def test_a_killed_worker_loses_at_most_its_shard(tmp_path):
    """SIGKILL a worker mid-shard; its claim is stale (pid gone), another worker finishes the build with the
    same vectors; only the killed shard was redone."""
    n, shard = 60, 10
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    p = ctx.Process(target=_worker, args=(tmp_path, n, shard, 0.3, out))
    p.start()
    deadline = time.time() + 60
    while not list(tmp_path.glob("shard-*.npy")) and time.time() < deadline:
        time.sleep(0.02)
    while not list(tmp_path.glob("*.claim")) and time.time() < deadline:
        time.sleep(0.02)
    os.kill(p.pid, 9)
    p.join()
    done_before = len(list(tmp_path.glob("shard-*[0-9].npy")))
    assert list(tmp_path.glob("*.claim"))  # the killed worker's claim is left behind
    enc = HashEncoder()
    got = emb.embed_claimed_shards(rows_of(n), n, tmp_path, enc, shard_size=shard, batch_size=4)
    assert got == n - done_before * shard  # nothing already written was redone
    np.testing.assert_array_equal(all_vectors(tmp_path, n, shard), expected(n))


def test_waits_for_shards_held_by_a_live_worker(tmp_path):
    n, shard = 20, 10
    held = emb.try_claim(tmp_path, 1)  # "another worker" (this process, alive) holds shard 1

    def finish_later():
        time.sleep(0.5)
        emb.embed_one_shard(rows_of(n), 1, n, tmp_path, HashEncoder(), shard_size=shard, batch_size=4)
        emb.release(held)

    t = threading.Thread(target=finish_later)
    t.start()
    got = emb.embed_claimed_shards(rows_of(n), n, tmp_path, HashEncoder(), shard_size=shard, batch_size=4,
                                   poll=0.05)
    # on return every shard exists: shard 1 was waited for, not left to the other worker (asserted before
    # join)
    assert emb.shard_path(tmp_path, 1).exists() and emb.done_passages(tmp_path, n, shard) == n
    t.join()
    assert got == 10 and emb.done_passages(tmp_path, n, shard) == n
    assert emb.embed_claimed_shards(rows_of(n), n, tmp_path, HashEncoder(), shard_size=shard, wait=False) == 0


GiB = 2**30


def test_one_fp16_worker_per_visible_gpu_batch_by_memory():
    plans = emb.plan_workers(None, [(0, 80 * GiB), (1, 80 * GiB), (2, 16 * GiB)], per_device=1)
    assert [p.device for p in plans] == ["cuda:0", "cuda:1", "cuda:2"]
    assert all(p.fp16 for p in plans)
    assert [p.batch_size for p in plans] == [4096, 4096, 2048]
    assert emb.plan_workers(256, [(0, 80 * GiB)], per_device=1)[0].batch_size == 256  # --batch-size wins
    assert emb.plan_workers(None, []) == [emb.WorkerPlan("cpu", 64, False)]
    assert emb.gpu_batch_size(int(0.25 * GiB)) == 64


def test_workers_share_each_gpu_as_far_as_the_cores_go():
    """The tokeniser runs on the CPU (one core per worker): up to 4 workers per device, each batch sized to
    its share of the device's memory."""
    assert emb.workers_per_device(1, cpus=16) == 4
    assert emb.workers_per_device(8, cpus=16) == 2
    assert emb.workers_per_device(8, cpus=4) == 1
    assert emb.workers_per_device(1, cpus=2) == 2
    plans = emb.plan_workers(None, [(0, 16 * GiB), (1, 16 * GiB)], cpus=16)
    assert [p.device for p in plans] == ["cuda:0"] * 4 + ["cuda:1"] * 4
    assert {p.batch_size for p in plans} == {512}  # 4 GiB each
    assert [p.device for p in emb.plan_workers(None, [(0, 80 * GiB)], per_device=2,
                                               cpus=16)] == ["cuda:0"] * 2
    assert emb.plan_workers(None, [], cpus=16) == [emb.WorkerPlan("cpu", 64, False)]


def test_cuda_devices_enumerates_torch_devices(monkeypatch):
    import torch

    class Props:
        total_memory = 24 * GiB

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: Props())
    assert emb.cuda_devices() == [(0, 24 * GiB), (1, 24 * GiB)]


class ThreadProc:
    def __init__(self, fn):
        self.exitcode = None
        self._t = threading.Thread(target=self._run, args=(fn,))
        self._t.start()

    def _run(self, fn):
        try:
            fn()
            self.exitcode = 0
        except BaseException:
            self.exitcode = 1

    def is_alive(self):
        return self._t.is_alive()

    def terminate(self):
        pass

    def join(self):
        self._t.join()


def test_embed_on_devices_starts_one_worker_per_device(tmp_path):
    n, shard = 50, 10
    started = []

    def start(target, args):
        store_path, n_passages, folder, encoder_name, plan, shard_size, stale_after = args
        assert target is emb._device_worker and encoder_name == "hash"
        started.append(plan.device)
        return ThreadProc(lambda: emb.embed_claimed_shards(rows_of(n_passages), n_passages, tmp_path / "s",
                                                           HashEncoder(0.01), shard_size=shard_size,
                                                           poll=0.02,
                                                           batch_size=plan.batch_size, device=plan.device))

    plans = emb.plan_workers(None, [(0, 40 * GiB), (1, 40 * GiB)], per_device=1)
    seen = []
    got = emb.embed_on_devices(tmp_path / "store", n, tmp_path / "s", "hash", plans, shard_size=shard,
                               progress=lambda d, t: seen.append(d), poll=0.01, start=start)
    assert started == ["cuda:0", "cuda:1"] and got == n and seen[-1] == n
    np.testing.assert_array_equal(all_vectors(tmp_path / "s", n, shard), expected(n))


def test_embed_on_devices_reports_failed_workers(tmp_path):
    from veracity.errors import IndexDirError

    def start(target, args):
        return ThreadProc(lambda: (_ for _ in ()).throw(RuntimeError("CUDA out of memory")))

    with pytest.raises(IndexDirError, match="2 of 2 embedding workers failed") as err:
        emb.embed_on_devices(tmp_path / "store", 20, tmp_path / "s", "hash", emb.plan_workers(None, [(0, GiB),
                                                                                                     (1,
                                                                                                      GiB)],
                                                                                              per_device=1),
                             shard_size=10, poll=0.01, start=start)
    assert "run the same command again" in err.value.hint


def test_a_build_finished_by_another_process_ends_the_wait(tmp_path):
    """The other process embedded the last shard, built the index and moved the folder away while this one
    waited: the wait ends without error, and claiming in a vanished folder is no claim."""
    n, shard = 20, 10
    folder = tmp_path / "shards"
    held = emb.try_claim(folder if folder.mkdir() is None else folder, 1)

    def finish_and_move():
        time.sleep(0.3)
        emb.embed_one_shard(rows_of(n), 1, n, folder, HashEncoder(), shard_size=shard, batch_size=4)
        emb.release(held)
        folder.rename(tmp_path / "moved")

    t = threading.Thread(target=finish_and_move)
    t.start()
    got = emb.embed_claimed_shards(rows_of(n), n, folder, HashEncoder(), shard_size=shard, batch_size=4,
                                   poll=0.5)
    t.join()
    assert got == 10 and not folder.exists()
    assert emb.try_claim(folder, 0) is None


def test_a_claim_names_its_owner_and_an_unreadable_one_names_nobody(tmp_path):
    claim = emb.try_claim(tmp_path, 0)
    assert emb.claim_owner(claim.path) == f"pid {os.getpid()} on {socket.gethostname()}"
    for i, body in enumerate(["", "{not json", json.dumps({"pid": 5}), json.dumps([1, 2])], 1):
        emb.claim_path(tmp_path, i).write_text(body)
        assert emb.claim_owner(emb.claim_path(tmp_path, i)) == "", body
    assert emb.claim_owner(tmp_path / "none.claim") == ""


def test_a_claim_is_stale_by_its_owner_on_this_host_else_by_its_age(tmp_path):
    here = socket.gethostname()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = tmp_path / "c.claim"
    assert not emb.claim_is_stale(path, 60)  # no claim: nothing to take over
    t = time.time()
    os_time = (t - 30, t - 30)
    # this host's: its process decides, whatever the age
    path.write_text(json.dumps({"host": here, "pid": os.getpid()}))
    os.utime(path, (t - 3600, t - 3600))
    assert not emb.claim_is_stale(path, 60)
    path.write_text(json.dumps({"host": here, "pid": dead.pid}))
    assert emb.claim_is_stale(path, 60)
    # another host's, an unreadable one, or one whose pid is no number: the heartbeat's age decides
    for body in (json.dumps({"host": "elsewhere.example", "pid": os.getpid()}), "", "{not json",
                 json.dumps({"host": here, "pid": str(os.getpid())})):
        path.write_text(body)
        os.utime(path, os_time)
        assert not emb.claim_is_stale(path, 60), body
        assert emb.claim_is_stale(path, 29), body
        assert not emb.claim_is_stale(path, 60, now=t + 29), body  # 59 s old at `now`
        assert emb.claim_is_stale(path, 60, now=t + 31), body


def test_a_claim_is_not_made_for_a_done_shard_nor_kept_when_it_was_done_meanwhile(tmp_path):
    path = emb.claim_path(tmp_path, 0)
    assert emb.acquire(path, done=lambda: True) is None and not list(tmp_path.iterdir())
    checks = []

    def done_after_the_link() -> bool:  # done at the second look: finished by its previous owner meanwhile
        checks.append(path.exists())
        return len(checks) > 1

    assert emb.acquire(path, done=done_after_the_link) is None
    assert checks == [False, True] and not list(tmp_path.iterdir())  # the claim made is given back
    assert emb.acquire(tmp_path / "gone" / "shard-00000.claim") is None  # the build folder is gone
    claim = emb.acquire(path, device="cuda:1")
    body = json.loads(path.read_text())
    assert claim == emb.ShardClaim(path,
                                   body["token"]) and body["device"] == "cuda:1" and len(body["token"]) == 32


def test_a_heartbeat_renews_the_claim_and_release_leaves_an_unreadable_one(tmp_path):
    claim = emb.try_claim(tmp_path, 0)
    os.utime(claim.path, (1, 1))
    emb.heartbeat(claim)
    assert time.time() - claim.path.stat().st_mtime < 60
    claim.path.write_text("{not json")
    emb.release(claim)  # not provably ours: kept
    assert claim.path.exists()
    claim.path.unlink()
    emb.heartbeat(claim)  # a claim already gone: nothing to renew, no error
    emb.release(claim)
    assert not claim.path.exists()


class WatchingEncoder(HashEncoder):
    """Notes each call's batch size and the claims present in ``folder`` while it encodes."""

    def __init__(self, folder):
        super().__init__()
        self.folder, self.batch_sizes, self.claims = folder, [], []

    def encode(self, texts, batch_size=64):
        self.batch_sizes.append(batch_size)
        self.claims.append([json.loads(p.read_text()) for p in sorted(self.folder.glob("*.claim"))])
        return super().encode(texts, batch_size=batch_size)


def test_a_worker_says_its_progress_and_each_shard_and_claims_under_its_device(tmp_path):
    n, shard = 25, 10
    folder = tmp_path / "s"
    folder.mkdir()
    emb.embed_one_shard(rows_of(n), 0, n, folder, HashEncoder(), shard_size=shard, batch_size=4)  # done
    enc, progress, shards = WatchingEncoder(folder), [], []
    got = emb.embed_claimed_shards(rows_of(n), n, folder, enc, shard_size=shard, batch_size=2,
                                   device="cuda:3", progress=lambda d, t: progress.append((d, t)),
                                   on_shard=shards.append, wait=False)
    assert got == 15 and shards == [1, 2] and progress == [(10, 25), (20, 25), (25, 25)]
    assert enc.batch_sizes == [2, 2]  # the worker's batch size reaches the encoder
    # while a shard is embedded its claim (and only its) is there, naming this process and the device
    assert [[(c["device"], c["pid"]) for c in cs] for cs in enc.claims] == [[("cuda:3", os.getpid())]] * 2
    assert not list(folder.glob("*.claim"))
    np.testing.assert_array_equal(all_vectors(folder, n, shard), expected(n))
    # the defaults: shards of 4,096 passages (the build's --shard-size), batches of 64, the device "cpu"; a
    # build folder not there yet is made when its parent is; progress after each encoder call, once
    fresh, big = tmp_path / "fresh", 4097
    enc, progress = WatchingEncoder(fresh), []
    assert emb.embed_claimed_shards(rows_of(big), big, fresh, enc,
                                    progress=lambda d, t: progress.append(d)) == big
    assert len(np.load(emb.shard_path(fresh, 0))) == 4096 and len(np.load(emb.shard_path(fresh, 1))) == 1
    assert set(enc.batch_sizes) == {64} and {c["device"] for cs in enc.claims for c in cs} == {"cpu"}
    assert progress == [0, *range(512, 4097, 512), 4097]
    # the claim is renewed between the encoder calls of a shard (a heartbeat), not only made at its start
    seen = []

    class Aging(HashEncoder):
        def encode(self, texts, batch_size=64):
            (path,) = (tmp_path / "beat").glob("*.claim")
            seen.append(path.stat().st_mtime)
            os.utime(path, (1, 1))  # as if silent for decades
            return super().encode(texts, batch_size=batch_size)

    (tmp_path / "beat").mkdir()
    emb.embed_claimed_shards(rows_of(20), 20, tmp_path / "beat", Aging(), shard_size=20, batch_size=1)
    assert len(seen) == 3 and min(seen) > time.time() - 600  # 8 + 8 + 4 passages: renewed before each
    gone = tmp_path / "moved" / "s"
    assert emb.embed_claimed_shards(rows_of(n), n, gone, HashEncoder(), shard_size=shard) == 0
    assert not gone.parent.exists()


def test_a_waiting_worker_counts_the_other_workers_shards_and_takes_over_by_its_stale_after(tmp_path,
                                                                                              monkeypatch):
    n, shard = 20, 10
    held = emb.try_claim(tmp_path, 1)  # another live worker holds shard 1 ...
    slept = []

    class Clock:  # ... and finishes it while this one waits
        time = staticmethod(time.time)

        @staticmethod
        def sleep(seconds):
            slept.append(seconds)
            if len(slept) == 1:
                emb.embed_one_shard(rows_of(n), 1, n, tmp_path, HashEncoder(), shard_size=shard, batch_size=4)
                emb.release(held)

    monkeypatch.setattr(emb, "time", Clock)
    progress = []
    got = emb.embed_claimed_shards(rows_of(n), n, tmp_path, HashEncoder(), shard_size=shard, batch_size=4,
                                   poll=0.02, progress=lambda d, total: progress.append((d, total)))
    monkeypatch.undo()
    # one wait of `poll` seconds; its progress counts the shard the other worker wrote
    assert got == 10 and slept == [0.02] and progress == [(0, 20), (10, 20), (20, 20)]
    # a worker's stale_after decides when another host's silent claim is taken over
    other_host = tmp_path / "b"
    other_host.mkdir()
    path = emb.claim_path(other_host, 0)
    path.write_text(json.dumps({"host": "elsewhere.example", "pid": 1, "token": "x"}))
    old = time.time() - 100
    os.utime(path, (old, old))
    assert emb.embed_claimed_shards(rows_of(n), n, other_host, HashEncoder(), shard_size=shard,
                                    wait=False) == 10  # 100 s without a heartbeat: alive at the default
    assert emb.embed_claimed_shards(rows_of(n), n, other_host, HashEncoder(), shard_size=shard,
                                    stale_after=60, wait=False) == 10
    assert emb.done_passages(other_host, n, shard) == n and not path.exists()


def test_a_claim_holds_its_owner_and_a_takeover_is_tried_twice_at_most(tmp_path, monkeypatch):
    path = emb.claim_path(tmp_path, 0)
    before = time.time()
    claim = emb.try_claim(tmp_path, 0, device="cuda:2")
    body = json.loads(path.read_text())
    assert sorted(body) == ["device", "host", "pid", "started", "token"] and body["token"] == claim.token
    assert (body["host"], body["pid"], body["device"]) == (socket.gethostname(), os.getpid(), "cuda:2")
    assert before <= body["started"] <= time.time()
    emb.release(claim)
    # by default a claim names the device "cpu"; a shard already written is not claimed
    for claim in (emb.try_claim(tmp_path, 7), emb.acquire(emb.claim_path(tmp_path, 8))):
        assert json.loads(claim.path.read_text())["device"] == "cpu"
        emb.release(claim)
    np.save(emb.shard_path(tmp_path, 9), np.zeros((1, DIM), dtype=np.float32))
    assert emb.try_claim(tmp_path, 9) is None and not emb.claim_path(tmp_path, 9).exists()
    emb.shard_path(tmp_path, 9).unlink()
    # exactly at stale_after a silent claim is not stale yet; a moment later it is
    path.write_text(json.dumps({"host": "elsewhere.example", "pid": 1}))
    os.utime(path, (1_000_000, 1_000_000))
    assert not emb.claim_is_stale(path, 60, now=1_000_060) and emb.claim_is_stale(path, 60, now=1_000_060.5)
    # the stale claim vanishes before it is removed (another worker took it over and finished): no error
    real_stale = emb.claim_is_stale

    def stale_and_gone(p, stale_after):
        p.unlink()
        return True

    monkeypatch.setattr(emb, "claim_is_stale", stale_and_gone)
    path.write_text("{}")
    claim = emb.acquire(path)
    assert claim is not None and json.loads(path.read_text())["token"] == claim.token
    emb.release(claim)
    # a claim that is there, stale, at every try: taken over once, then left (no endless loop)
    links = []

    def always_there(src, dst):
        links.append((src, dst))
        raise FileExistsError(dst)

    monkeypatch.setattr(emb, "claim_is_stale", lambda p, stale_after: True)
    monkeypatch.setattr(emb.os, "link", always_there)
    assert emb.acquire(path) is None and len(links) == 2 and not list(tmp_path.iterdir())
    # the claim is written to a hidden private file beside it first, then linked to its name
    src = Path(links[0][0])
    assert src.parent == tmp_path and src.name.startswith(".shard-00000.claim.") and src.name.endswith(".tmp")
    monkeypatch.setattr(emb, "claim_is_stale", real_stale)
