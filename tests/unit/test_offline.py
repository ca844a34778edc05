"""veracity/offline.py: every library's phone-home switched off in this process and in each child's
environment; a local Ray instance started with a HOME that keeps Ray from asking cloud metadata services."""

import os
import subprocess
import sys

import veracity  # noqa: F401  (importing it applies the switches)
from veracity.offline import OFFLINE_ENV, RAY_BOOTSTRAP, apply, child_env, local_ray_start, ray_head_home


def test_importing_veracity_sets_every_switch_in_this_process():
    for key, value in OFFLINE_ENV.items():
        assert os.environ[key] == value, key
    assert OFFLINE_ENV["RAY_USAGE_STATS_ENABLED"] == "0"
    assert OFFLINE_ENV["HF_HUB_OFFLINE"] == "1" and OFFLINE_ENV["VLLM_NO_USAGE_STATS"] == "1"


def test_a_users_opposite_setting_does_not_turn_a_phone_home_on():
    env = {"HF_HUB_OFFLINE": "0", "RAY_USAGE_STATS_ENABLED": "1", "PATH": "/bin"}
    apply(env)
    assert env["HF_HUB_OFFLINE"] == "1" and env["RAY_USAGE_STATS_ENABLED"] == "0" and env["PATH"] == "/bin"


def test_a_child_started_with_its_own_env_gets_the_switches_and_its_extras():
    env = child_env({"PATH": "/bin", "DO_NOT_TRACK": "0"}, PYTHONUNBUFFERED="1")
    assert env["DO_NOT_TRACK"] == "1" and env["PYTHONUNBUFFERED"] == "1" and env["PATH"] == "/bin"


def test_a_child_python_process_that_imports_veracity_has_them_too():
    clean = {k: v for k, v in os.environ.items() if k not in OFFLINE_ENV}
    out = subprocess.run([sys.executable, "-c",
                          "import veracity, os; print(os.environ['RAY_USAGE_STATS_ENABLED'])"],
                         env=clean, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


def test_the_engines_server_environments_carry_the_switches(tmp_path):
    from veracity.serving.engines.llamacpp import LLAMA_CPP
    from veracity.serving.engines.vllm import build_env
    from veracity.serving.spec import ServerSpec

    spec = ServerSpec(model="smollm2-135m-instruct", port=1)
    for env in (build_env(spec, on_gpu=False), LLAMA_CPP.env(spec, on_gpu=False)):
        assert all(env[k] == v for k, v in OFFLINE_ENV.items())


def test_local_ray_start_gives_rays_processes_a_home_with_a_local_bootstrap_config(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.delenv("VERACITY_HOME", raising=False)
    with local_ray_start(tmp_path / "vh"):
        inside = os.environ["HOME"]
        assert os.environ["VERACITY_HOME"] == str(tmp_path / "vh")
    assert os.environ["HOME"] == "/home/someone"
    assert inside == str(ray_head_home(tmp_path / "vh"))
    config = (tmp_path / "vh" / "ray-home" / RAY_BOOTSTRAP).read_text()
    assert "type: local" in config  # Ray reads provider.type from it and asks no metadata service


def test_a_vllm_server_on_loopback_is_told_its_address_so_it_never_probes_for_one(monkeypatch):
    from veracity.serving.engines.vllm import build_env
    from veracity.serving.spec import ServerSpec

    monkeypatch.delenv("VLLM_HOST_IP", raising=False)
    assert build_env(ServerSpec(model="m", port=1), on_gpu=False)["VLLM_HOST_IP"] == "127.0.0.1"
    assert "VLLM_HOST_IP" not in build_env(ServerSpec(model="m", port=1, host="0.0.0.0"), on_gpu=False)
    monkeypatch.setenv("VLLM_HOST_IP", "10.0.0.5")  # a user's own setting wins
    assert build_env(ServerSpec(model="m", port=1), on_gpu=False)["VLLM_HOST_IP"] == "10.0.0.5"
