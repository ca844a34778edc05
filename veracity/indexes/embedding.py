"""Embedding a build's passages into shard files, by any number of workers at once.

A shard (``shard-00042.npy``, ``shard_size`` passages) is the unit of work. A worker takes one by creating its
claim file ``shard-00042.claim`` with ``O_CREAT | O_EXCL`` (atomic on a local file system and on NFSv3+), the
claim holding its owner (host, pid, start time); it embeds the shard, touching the claim as it goes (a
heartbeat), writes the vectors to a file of its own and renames it to ``shard-00042.npy`` (atomic), then
removes the claim. So several processes — on one machine, or on machines sharing the build folder — embed
one build together, and an interrupted worker loses at most the shard it held. A claim whose owner is gone
(on this host: its pid is not running; elsewhere: no heartbeat for ``stale_after`` seconds) is taken over.
Two workers embedding the same shard (a takeover race) is harmless: a shard's vectors depend only on its
passages and the encoder, and the rename is atomic.

Hardware: on GPUs up to four worker processes per visible device (the tokeniser runs on the CPU, and one
worker leaves the GPU waiting for it), the encoder in fp16, the batch sized to each worker's share of the
device's memory (:func:`plan_workers`); on CPU one worker in this process (torch uses the cores).
``index build --backend ray`` runs the workers as Ray Data actors (GPU actors when the cluster has GPUs)
writing the same files (:func:`embed_with_ray`); the build folder must then be on a file system every node
sees.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from veracity.errors import IndexDirError
from veracity.processes import pid_alive

STALE_AFTER_S = 600.0   # a claim of another host without a heartbeat for this long is taken over
POLL_S = 2.0            # while the remaining shards are all claimed by live workers


def shard_path(folder: Path, i: int) -> Path:
    return folder / f"shard-{i:05d}.npy"


def claim_path(folder: Path, i: int) -> Path:
    return folder / f"shard-{i:05d}.claim"


def n_shards(n_passages: int, shard_size: int) -> int:
    return (n_passages + shard_size - 1) // shard_size


def shard_rows(i: int, n_passages: int, shard_size: int) -> tuple[int, int]:
    return i * shard_size, min(n_passages, (i + 1) * shard_size)


def done_passages(folder: Path, n_passages: int, shard_size: int) -> int:
    return sum(b - a for i in range(n_shards(n_passages, shard_size))
               for a, b in [shard_rows(i, n_passages, shard_size)] if shard_path(folder, i).exists())


# ------------------------------------------------------------------------------------------------ claims

@dataclass(frozen=True)
class ShardClaim:
    path: Path
    token: str


def claim_is_stale(path: Path, stale_after: float = STALE_AFTER_S, *, now: float | None = None) -> bool:
    """Whether the claim at ``path`` belongs to nobody any more: its owner on this host is not running, or
    (another host's, or unreadable) it had no heartbeat for ``stale_after`` seconds."""
    try:
        st = path.stat()
        owner = json.loads(path.read_text(encoding="utf-8") or "{}")
    except FileNotFoundError:
        return False
    except (ValueError, OSError):
        owner = {}
    age = (time.time() if now is None else now) - st.st_mtime
    if owner.get("host") == socket.gethostname() and isinstance(owner.get("pid"), int):
        return not pid_alive(owner["pid"])
    return age > stale_after


def acquire(path: Path, *, stale_after: float = STALE_AFTER_S, device: str = "cpu",
            done: Callable[[], bool] = lambda: False) -> ShardClaim | None:
    """Create the claim file ``path`` atomically (None: ``done()`` already, or held by a live owner; a stale
    claim is taken over)."""
    token = uuid.uuid4().hex
    body = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "device": device, "token": token,
                       "started": time.time()}).encode()
    for _ in range(2):
        if done():
            return None
        # The claim appears with its owner already written in it: the body goes to a private file first,
        # which is then hard-linked to the claim's name (atomic, and refused when the name exists). A claim
        # created empty and written after — as before — stayed empty when Ctrl-C landed between the two
        # steps, and an empty claim has no owner to check, so every later build waited STALE_AFTER_S for it.
        tmp = path.with_name(f".{path.name}.{token}.tmp")
        try:
            tmp.write_bytes(body)
        except FileNotFoundError:  # the folder is gone: another process finished the build meanwhile
            return None
        try:
            os.link(tmp, path)
        except FileNotFoundError:
            return None
        except FileExistsError:
            if claim_is_stale(path, stale_after):
                path.unlink(missing_ok=True)  # its owner is gone: take it over
                continue
            return None
        finally:
            tmp.unlink(missing_ok=True)
        if done():  # finished by its previous owner between our checks
            release(ShardClaim(path, token))
            return None
        return ShardClaim(path, token)
    return None


def claim_owner(path: Path) -> str:
    """``pid N on HOST`` of a claim file ('' when unreadable)."""
    try:
        owner = json.loads(path.read_text(encoding="utf-8"))
        return f"pid {owner['pid']} on {owner['host']}"
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def try_claim(folder: Path, i: int, *, stale_after: float = STALE_AFTER_S,
              device: str = "cpu") -> ShardClaim | None:
    """Claim shard ``i`` (None: done, or held by a live worker)."""
    return acquire(claim_path(folder, i), stale_after=stale_after, device=device,
                   done=lambda: shard_path(folder, i).exists())


def release(claim: ShardClaim) -> None:
    """Remove the claim if it is still ours (a worker that took it over keeps its own)."""
    try:
        if json.loads(claim.path.read_text(encoding="utf-8")).get("token") == claim.token:
            claim.path.unlink(missing_ok=True)
    except (FileNotFoundError, ValueError):
        pass


def heartbeat(claim: ShardClaim) -> None:
    try:
        os.utime(claim.path)
    except FileNotFoundError:
        pass


# ------------------------------------------------------------------------------------------------ workers

Rows = Callable[[int, int], list]


def embed_one_shard(rows: Rows, i: int, n_passages: int, folder: Path, encoder, *, shard_size: int,
                    batch_size: int, claim: ShardClaim | None = None,
                    on_passages: Callable[[int], None] | None = None) -> int:
    """Embed shard ``i`` and write it atomically; returns the passages embedded."""
    start, stop = shard_rows(i, n_passages, shard_size)
    batch = rows(start, stop)
    if len(batch) != stop - start:
        raise IndexDirError(f"passage store returned {len(batch)} rows for [{start}, {stop})",
                            hint="delete the partial build and start again")
    vecs = []
    step = batch_size * 8  # several encoder calls per shard: a live progress bar, a heartbeat between them
    for j in range(0, len(batch), step):
        part = batch[j:j + step]
        vecs.append(encoder.encode([f"{t}\n{x}" for _, t, x in part], batch_size=batch_size))
        if claim is not None:
            heartbeat(claim)
        if on_passages:
            on_passages(len(part))
    path = shard_path(folder, i)
    tmp = folder / f".shard-{i:05d}.{socket.gethostname()}-{os.getpid()}.tmp.npy"
    np.save(tmp, np.concatenate(vecs).astype(np.float32))
    os.replace(tmp, path)
    return len(batch)


def embed_claimed_shards(rows: Rows, n_passages: int, folder: Path, encoder, *, shard_size: int = 4096,
                         batch_size: int = 64, progress: Callable[[int, int], None] | None = None,
                         on_shard: Callable[[int], None] | None = None, stale_after: float = STALE_AFTER_S,
                         device: str = "cpu", wait: bool = True, poll: float = POLL_S) -> int:
    """Claim and embed shards until none is left; returns the passages this worker embedded. With ``wait``,
    shards held by other live workers are waited for (and taken over when their owner dies), so on return
    every shard exists (or the build folder is gone: another process finished the build)."""
    if folder.parent.is_dir():  # never re-create a build folder another process has moved into place
        folder.mkdir(exist_ok=True)
    total = n_shards(n_passages, shard_size)
    embedded = 0
    done = done_passages(folder, n_passages, shard_size)
    if progress:
        progress(done, n_passages)

    def passages(k: int) -> None:
        nonlocal done
        done += k
        if progress:
            progress(done, n_passages)

    while True:
        if not folder.is_dir():  # another process of this build embedded the rest and moved on
            return embedded
        pending = [i for i in range(total) if not shard_path(folder, i).exists()]
        if not pending:
            return embedded
        took = False
        for i in pending:
            claim = try_claim(folder, i, stale_after=stale_after, device=device)
            if claim is None:
                continue
            took = True
            try:
                embedded += embed_one_shard(rows, i, n_passages, folder, encoder, shard_size=shard_size,
                                            batch_size=batch_size, claim=claim, on_passages=passages)
            finally:
                release(claim)
            if on_shard:
                on_shard(i)
        if not took:
            if not wait:
                return embedded
            time.sleep(poll)
            done = done_passages(folder, n_passages, shard_size)  # other workers' shards
            if progress:
                progress(done, n_passages)


# ------------------------------------------------------------------------------------------------ devices

@dataclass(frozen=True)
class WorkerPlan:
    device: str          # "cpu" or "cuda:N"
    batch_size: int
    fp16: bool


def cuda_devices() -> list[tuple[int, int]]:
    """(index, total memory in bytes) of every visible CUDA device ([] without torch CUDA)."""
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    return [(i,
             int(torch.cuda.get_device_properties(i).total_memory)) for i in range(torch.cuda.device_count())]


def gpu_batch_size(memory_bytes: int, requested: int | None = None) -> int:
    """Encoder batch for a GPU share of ``memory_bytes``: 128 per GiB, a power of two between 64 and 4096
    (all-
    MiniLM-L6-v2 in fp16 peaked at 7,655 MiB at batch 4096 on an H200, about 1.9 MiB per passage, so a
    quarter of the share is left to the allocator and the model). ``requested`` (``--batch-size``) wins."""
    if requested:
        return requested
    per_gib = 128 * memory_bytes / 2**30
    return int(min(4096, max(64, 2 ** int(np.log2(max(1.0, per_gib))))))


MAX_WORKERS_PER_DEVICE = 4


def workers_per_device(n_devices: int, cpus: int | None = None) -> int:
    """Worker processes sharing each GPU: the encoder's tokeniser runs on the CPU, one core per worker, and
    with one worker the GPU waits for it (H200, all-MiniLM-L6-v2 fp16, 16 cores: tokenising alone 3,240
    passages/s on one thread; 1 / 2 / 4 workers on the device 2,929 / 4,881 / 6,654 passages/s, BENCHMARKS.md
    "Embedding on a GPU"). So up to 4 per device, as far as the cores go."""
    if cpus is None:
        from veracity.indexes.parallel import default_workers

        cpus = default_workers()
    return max(1, min(MAX_WORKERS_PER_DEVICE, cpus // max(1, n_devices)))


def plan_workers(batch_size: int | None = None, devices: list[tuple[int, int]] | None = None,
                 per_device: int | None = None, cpus: int | None = None) -> list[WorkerPlan]:
    """``per_device`` fp16 workers on each visible GPU (default :func:`workers_per_device`), each batch sized
    to
    its share of the device's memory; without a GPU one CPU worker."""
    devices = cuda_devices() if devices is None else devices
    if not devices:
        return [WorkerPlan("cpu", batch_size or 64, False)]
    k = per_device or workers_per_device(len(devices), cpus)
    return [WorkerPlan(f"cuda:{i}", gpu_batch_size(mem // k, batch_size), True) for i,
            mem in devices for _ in range(k)]


def _device_worker(store_path: str, n_passages: int, folder: str, encoder_name: str, plan: WorkerPlan,
                   shard_size: int, stale_after: float) -> int:
    """One device's worker process: its own encoder on its device, claiming shards until none is left."""
    from veracity.indexes.store import PassageStore
    from veracity.models.encoders import load_encoder

    store = PassageStore(Path(store_path))
    encoder = load_encoder(encoder_name, device=plan.device)
    return embed_claimed_shards(store.iter_rows, n_passages, Path(folder), encoder, shard_size=shard_size,
                                batch_size=plan.batch_size, stale_after=stale_after, device=plan.device)


def embed_on_devices(store_path: Path, n_passages: int, folder: Path, encoder_name: str,
                     plans: list[WorkerPlan],
                     *, shard_size: int, stale_after: float = STALE_AFTER_S,
                     progress: Callable[[int, int], None] | None = None, poll: float = 1.0,
                     start: Callable | None = None) -> int:
    """Run one worker process per plan (spawned: CUDA does not survive fork) and follow the shard files for
    progress; returns the passages embedded. ``start(target, args) -> process`` replaces the spawner
    (tests)."""
    import multiprocessing as mp

    folder.mkdir(parents=True, exist_ok=True)
    before = done_passages(folder, n_passages, shard_size)
    ctx = mp.get_context("spawn")

    def spawn(target, args):
        p = ctx.Process(target=target, args=args, daemon=True)
        p.start()
        return p

    start = start or spawn
    procs = [start(_device_worker, (str(store_path), n_passages, str(folder), encoder_name, plan, shard_size,
                                    stale_after)) for plan in plans]
    try:
        while any(p.is_alive() for p in procs):
            if progress:
                progress(done_passages(folder, n_passages, shard_size), n_passages)
            time.sleep(poll)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
            p.join()
    failed = [p.exitcode for p in procs if p.exitcode]
    done = done_passages(folder, n_passages, shard_size)
    if progress:
        progress(done, n_passages)
    if failed or done < n_passages:
        raise IndexDirError(f"{len(failed)} of {len(procs)} embedding workers failed (exit codes {failed}); "
                            f"{done:,} of {n_passages:,} passages are embedded",
                            hint="run the same command again: it resumes from the shards written")
    return done - before


# ------------------------------------------------------------------------------------------------ Ray

class ShardEmbedder:
    """A Ray Data actor: loads the encoder once (on its GPU when Ray gave it one, fp16), then embeds the
    shards
    of each batch through the same claims and files as a local worker."""

    def __init__(self, store_path: str, n_passages: int, folder: str, encoder_name: str, shard_size: int,
                 batch_size: int | None, stale_after: float):
        from veracity.indexes.store import PassageStore
        from veracity.models.encoders import load_encoder

        gpus = cuda_devices()
        self.plan = plan_workers(batch_size, gpus[:1], per_device=1)[0]  # Ray gives the actor its own GPU
        self.store = PassageStore(Path(store_path))
        self.encoder = load_encoder(encoder_name, device=self.plan.device)
        self.args = (n_passages, Path(folder), shard_size, stale_after)

    def __call__(self, batch: dict) -> dict:
        n_passages, folder, shard_size, stale_after = self.args
        out = []
        for i in batch["shard"]:
            i = int(i)
            claim = try_claim(folder, i, stale_after=stale_after, device=self.plan.device)
            n = 0
            if claim is not None:
                try:
                    n = embed_one_shard(self.store.iter_rows, i, n_passages, folder, self.encoder,
                                        shard_size=shard_size, batch_size=self.plan.batch_size, claim=claim)
                finally:
                    release(claim)
            out.append(n)
        return {"shard": np.asarray(batch["shard"]), "embedded": np.asarray(out)}


def embed_with_ray(store_path: Path, n_passages: int, folder: Path, encoder_name: str, *, shard_size: int,
                   batch_size: int | None = None, actors: int | None = None,
                   stale_after: float = STALE_AFTER_S,
                   progress: Callable[[int, int], None] | None = None) -> int:
    """Embed the missing shards with a pool of Ray Data actors: one per GPU of the cluster (``num_gpus=1``
    each), else ``actors`` CPU actors (default: one per 2 CPUs of the cluster). Ray must be initialised by
    the caller (a local instance or a cluster's). Shards other workers hold are left to them; the caller
    waits for those with :func:`embed_claimed_shards`."""
    import ray
    from ray.data import ActorPoolStrategy

    folder.mkdir(parents=True, exist_ok=True)
    pending = [i for i in range(n_shards(n_passages, shard_size)) if not shard_path(folder, i).exists()]
    if not pending:
        return 0
    res = ray.cluster_resources()
    gpus = int(res.get("GPU", 0))
    size = gpus if gpus else (actors or max(1, int(res.get("CPU", 1)) // 2))
    size = max(1, min(size, len(pending)))
    ds = ray.data.from_items([{"shard": i} for i in pending], override_num_blocks=len(pending))
    ds = ds.map_batches(ShardEmbedder, batch_size=1, compute=ActorPoolStrategy(size=size),
                        fn_constructor_kwargs=dict(store_path=str(store_path), n_passages=n_passages,
                                                   folder=str(folder), encoder_name=encoder_name,
                                                   shard_size=shard_size, batch_size=batch_size,
                                                   stale_after=stale_after),
                        num_gpus=1 if gpus else 0, num_cpus=1 if gpus else max(1, int(res.get("CPU",
                                                                                              1)) // size))
    embedded = 0
    done = done_passages(folder, n_passages, shard_size)
    for row in ds.iter_rows():
        embedded += int(row["embedded"])
        a, b = shard_rows(int(row["shard"]), n_passages, shard_size)
        done += b - a if row["embedded"] else 0
        if progress:
            progress(min(done, n_passages), n_passages)
    return embedded
