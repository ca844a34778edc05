"""The integration tests' server start-ups ahead of time (tests/fixtures/server.py): started one at a time in
order, at most SPARES_AHEAD private servers waiting, every server no test took stopped at the end, and the
collection order that lets the start-ups overlap tests. vLLM itself is replaced by a recorder here; the
integration tests run the real thing."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.fixtures import server as fx


@pytest.fixture(autouse=True)
def _not_the_running_sessions_xdist_worker(monkeypatch):
    """Run under pytest-xdist, these tests must neither take the collection hook for a worker's nor write
    the running session's groups file (a test that wants a worker sets both itself)."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    monkeypatch.delenv(fx.GROUPS_ENV, raising=False)


@pytest.fixture(autouse=True)
def _the_running_sessions_last_vllm_user():
    """These tests call the plugin's collection hook with made-up items, which sets the module's
    ``_LAST_VLLM_USER``: what the running session collected is put back after each test. Without this the
    session's own vLLM server never stopped after its last test in a full run (the unit tests run before
    the integration modules and left a made-up node id there), and the API-server kill test started a
    private vLLM server instead of taking the session's (CI profile of 2026-11-29, BENCHMARKS.md)."""
    kept = list(fx._LAST_VLLM_USER)
    yield
    fx._LAST_VLLM_USER[:] = kept


@pytest.fixture()
def fake_vllm(monkeypatch):
    log: list[tuple[str, str]] = []

    def start(home, port, name, spec=None):
        log.append(("start", name))
        return fx.Endpoint(f"http://127.0.0.1:{port}/v1", "m", 1, None, home, name)

    def stop(settings, name):
        log.append(("stop", name))

    monkeypatch.setattr(fx, "_start", start)
    monkeypatch.setattr("veracity.serving.server.stop_server", stop)
    monkeypatch.setattr(fx, "_stop", lambda ep: log.append(("stop", ep.name)))
    return SimpleNamespace(log=log)


def slots(tmp_path: Path, n: int, session: bool = True):
    s = fx._Slot("test", tmp_path / "s", fx.SESSION_SPEC,
                 fx.StartRecord("session server")) if session else None
    return s, [fx._Slot(f"spare-{i}", tmp_path / f"p{i}", fx.SPARE_SPEC,
                        fx.StartRecord(f"private server {i}"))
               for i in range(1, n + 1)]


def wait_until(cond, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.01)


def waiting_before(starts: fx.ServerStarts, i: int, timeout: float = 10.0) -> None:
    """The start-up thread has decided not to start spares[i] yet and waits (an event, not a sleep): whatever
    was started by now is all that starts until a spare is taken (or memory frees up)."""
    wait_until(lambda: starts.waiting.is_set() and starts.waiting_for == i, timeout)


def test_session_first_then_spares_never_more_than_ahead_waiting(fake_vllm, tmp_path, monkeypatch):
    monkeypatch.setattr(fx, "SPARES_AHEAD", 2)
    monkeypatch.setattr(fx, "_memory_available", lambda: fx.SPARE_MEMORY)
    session, spares = slots(tmp_path, 4)
    starts = fx.ServerStarts(session, spares)
    starts.begin()
    wait_until(lambda: len(fake_vllm.log) == 3)
    waiting_before(starts, 2)  # nothing more starts while two spares wait untaken
    assert fake_vllm.log == [("start", "test"), ("start", "spare-1"), ("start", "spare-2")]
    assert starts.session_endpoint().name == "test"
    assert starts.take_spare().name == "spare-1"
    wait_until(lambda: ("start", "spare-3") in fake_vllm.log)
    waiting_before(starts, 3)
    assert ("start", "spare-4") not in fake_vllm.log
    assert [starts.take_spare().name for _ in range(3)] == ["spare-2", "spare-3", "spare-4"]
    assert starts.take_spare() is None  # more than were counted: the fixture starts one on the spot
    starts.close()
    assert [e for e in fake_vllm.log if e[0] == "stop"] == []  # every server was taken: its fixture stops it
    assert all(r.seconds is not None and r.error is None for r in starts.records)


def test_a_second_spare_waits_only_where_memory_allows(fake_vllm, tmp_path, monkeypatch):
    monkeypatch.setattr(fx, "SPARES_AHEAD", 2)
    free = [fx.SPARE_MEMORY - 1]
    monkeypatch.setattr(fx, "_memory_available", lambda: free[0])
    _, spares = slots(tmp_path, 3, session=False)
    starts = fx.ServerStarts(None, spares)
    starts.begin()
    wait_until(lambda: len(fake_vllm.log) == 1)
    waiting_before(starts, 1)
    assert fake_vllm.log == [("start", "spare-1")]  # one waits whatever the memory
    free[0] = fx.SPARE_MEMORY
    wait_until(lambda: ("start", "spare-2") in fake_vllm.log, timeout=15)  # re-checked every 5 s
    starts.close()


def test_close_stops_what_no_test_took_and_starts_nothing_more(fake_vllm, tmp_path, monkeypatch):
    monkeypatch.setattr(fx, "SPARES_AHEAD", 1)
    session, spares = slots(tmp_path, 3)
    starts = fx.ServerStarts(session, spares)
    starts.begin()
    wait_until(lambda: len(fake_vllm.log) == 2)
    starts.close()  # e.g. `-x` ended the session early
    assert ("stop", "test") in fake_vllm.log and ("stop", "spare-1") in fake_vllm.log
    assert ("start", "spare-2") not in fake_vllm.log and ("start", "spare-3") not in fake_vllm.log
    with pytest.raises(RuntimeError, match="session ended"):
        spares[2].done.result(timeout=5)


def test_a_failed_start_up_reaches_the_test_that_takes_it(fake_vllm, tmp_path, monkeypatch):
    def broken(home, port, name, spec=None):
        raise OSError("port taken")

    monkeypatch.setattr(fx, "_start", broken)
    _, spares = slots(tmp_path, 1, session=False)
    starts = fx.ServerStarts(None, spares)
    starts.begin()
    with pytest.raises(OSError, match="port taken"):
        starts.take_spare()
    starts.close()
    assert spares[0].record.error == "OSError: port taken"


def _item(nodeid: str, *fixtures: str, marks: tuple[str, ...] = ()):
    return SimpleNamespace(nodeid=nodeid, fixturenames=list(fixtures),
                           get_closest_marker=lambda name: SimpleNamespace(name=name) if name in marks
                           else None)


def test_collection_order_runs_serverless_modules_first_and_server_killers_last():
    """... then the modules on the default engine, llama.cpp (the session's ``llm_endpoint``, ``web_url``, a
    private llama-server, the llama.cpp module): a llama-server build started behind the session (the
    README's test block) has the whole session to finish. vLLM's modules come before, while its start-ups
    run in the background."""
    items = [_item("tests/integration/test_llama.py::t1", "llm_endpoint", marks=(fx.LLAMA_MARK,)),
             _item("tests/integration/test_llama.py::t2", marks=(fx.LLAMA_MARK,)),
             _item("tests/integration/test_a.py::t1", "llm_endpoint"),
             _item("tests/integration/test_faults.py::t1", "llm_endpoint"),
             _item("tests/integration/test_faults.py::t2", "killable_llm_server", "vllm_endpoint"),
             _item("tests/integration/test_index.py::t1", "hover_index_dir"),
             _item("tests/integration/test_web.py::t1", "web_url"),
             _item("tests/integration/test_vllm.py::t1", "vllm_endpoint"),
             _item("tests/integration/test_pool.py::t1", "killable_llama_server", "llm_endpoint"),
             _item("tests/unit/test_x.py::t1"), _item("tests/unit/test_x.py::t2")]
    fx.pytest_collection_modifyitems(None, None, items)
    assert [i.nodeid for i in items] == [
        "tests/integration/test_index.py::t1", "tests/unit/test_x.py::t1", "tests/unit/test_x.py::t2",
        "tests/integration/test_vllm.py::t1",
        "tests/integration/test_llama.py::t1", "tests/integration/test_llama.py::t2",
        "tests/integration/test_a.py::t1", "tests/integration/test_faults.py::t1",
        "tests/integration/test_faults.py::t2", "tests/integration/test_web.py::t1",
        "tests/integration/test_pool.py::t1"]
    assert fx._demand(items) == (True, 1)


def test_under_xdist_vllm_is_one_group_handed_out_first_and_each_module_a_group(tmp_path, monkeypatch):
    """The README's ``-n 2 --dist loadscope``: one worker takes vLLM's modules as one group (first: its
    start-up and tests are the longest chain), Ray's modules are one group among the llama.cpp modules,
    every other module a group of its own, in the order of a run in one process. The workers write the
    groups at collection; the controller's scheduler reads them."""
    groups = tmp_path / "groups.json"
    monkeypatch.setenv(fx.GROUPS_ENV, str(groups))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    items = [_item("tests/integration/test_llama.py::t1", "llm_endpoint", marks=(fx.LLAMA_MARK,)),
             _item("tests/integration/test_ray_backend.py::t1", "llm_endpoint"),
             _item("tests/integration/test_index_scale.py::t1"),
             _item("tests/integration/test_faults.py::t1", "killable_llm_server", "vllm_endpoint"),
             _item("tests/integration/test_index.py::t1", "hover_index_dir"),
             _item("tests/integration/test_vllm.py::t1", "vllm_endpoint"),
             _item("tests/unit/test_x.py::t1"), _item("tests/unit/test_x.py::t2")]
    fx.pytest_collection_modifyitems(None, None, items)
    assert [i.nodeid for i in items] == [
        "tests/integration/test_faults.py::t1", "tests/integration/test_vllm.py::t1",
        "tests/integration/test_index.py::t1", "tests/unit/test_x.py::t1", "tests/unit/test_x.py::t2",
        "tests/integration/test_llama.py::t1", "tests/integration/test_ray_backend.py::t1",
        "tests/integration/test_index_scale.py::t1"]
    assert fx.is_last_vllm_user("tests/integration/test_vllm.py::t1")
    pytest.importorskip("xdist")
    config = SimpleNamespace(getvalue=lambda name: "loadscope", option=SimpleNamespace(tx=[], numprocesses=2,
                                                                                       dist="loadscope"))
    scheduler = fx.pytest_xdist_make_scheduler(config, None)
    scopes = [scheduler._split_scope(i.nodeid) for i in items]
    assert scopes == ["vllm", "vllm", "tests/integration/test_index.py", "tests/unit/test_x.py",
                      "tests/unit/test_x.py", "tests/integration/test_llama.py", "ray", "ray"]


def test_under_xdist_the_start_ups_begin_when_a_test_first_asks(fake_vllm, tmp_path):
    """Each xdist worker collects every test, so no worker starts vLLM at its session's start; the one whose
    test first asks for the session's server (or a private one) starts them then, once."""
    session, spares = slots(tmp_path, 1)
    starts = fx.ServerStarts(session, spares)
    try:
        assert fake_vllm.log == []
        ep = starts.session_endpoint()  # begins the start-ups, then waits for the session's server
        assert ep.name == "test" and starts.take_spare() is spares[0]
        starts.begin()  # a second begin starts nothing
        assert [e for e in fake_vllm.log if e[0] == "start"] == [("start", "test"), ("start", "spare-1")]
    finally:
        starts.close()


def test_a_modules_own_fixture_of_the_same_name_is_not_a_vllm_server():
    def ours():
        pass

    def theirs():  # e.g. the llama.cpp module's own killable_llm_server, or a vLLM module's llm_endpoint
        pass

    ours.__module__, theirs.__module__ = fx.__name__, "tests.integration.test_llamacpp_engine"

    def item(nodeid, func, names=("vllm_endpoint", "killable_llm_server")):
        defs = {n: [SimpleNamespace(func=func)] for n in names}
        return SimpleNamespace(nodeid=nodeid, fixturenames=list(defs),
                               _fixtureinfo=SimpleNamespace(name2fixturedefs=defs))

    items = [item("tests/integration/test_llamacpp_engine.py::t", theirs),
             item("tests/integration/test_faults.py::t", ours)]
    assert fx._demand(items) == (True, 1)
    assert fx._server_fixtures(items[0]) == set()
    # a module that rebinds llm_endpoint to the session's vLLM server needs vLLM, not a llama-server
    rebound = item("tests/integration/test_serving.py::t", theirs, ("llm_endpoint",))
    rebound._fixtureinfo.name2fixturedefs["vllm_endpoint"] = [SimpleNamespace(func=ours)]
    rebound.fixturenames.append("vllm_endpoint")
    assert fx._server_fixtures(rebound) == {"vllm_endpoint"}


def test_the_session_vllm_server_stops_after_its_last_test(fake_vllm, tmp_path, monkeypatch):
    """The llama.cpp modules after vLLM's get its cores and memory: the session's vLLM server is stopped as
    soon as the last collected test that uses it has finished, once."""
    session, _ = slots(tmp_path, 0)
    starts = fx.ServerStarts(session, [])
    monkeypatch.setattr(fx, "_STARTS", [starts])
    items = [_item("tests/integration/test_vllm.py::t1", "vllm_endpoint"),
             _item("tests/integration/test_vllm.py::t2", "vllm_endpoint"),
             _item("tests/integration/test_a.py::t1", "llm_endpoint")]
    fx.pytest_collection_modifyitems(None, None, items)
    starts.begin()
    ep = starts.session_endpoint()
    fx.pytest_runtest_logfinish("tests/integration/test_vllm.py::t1", None)
    assert ("stop", "test") not in fake_vllm.log and not ep.stopped
    fx.pytest_runtest_logfinish("tests/integration/test_vllm.py::t2", None)
    assert fake_vllm.log.count(("stop", "test")) == 1 and ep.stopped
    fx.pytest_runtest_logfinish("tests/integration/test_a.py::t1", None)
    starts.close()
    assert fake_vllm.log.count(("stop", "test")) == 1


def test_under_xdist_an_index_fixture_is_built_once_for_all_workers(tmp_path, monkeypatch):
    """tests/fixtures/index.py's built_once: the workers share one build in their common temporary folder
    (the second reuses the first's); a build that failed is tried again; without xdist each session builds
    its own."""
    from tests.fixtures.index import built_once

    def factory(worker):
        base = tmp_path / "run" / f"popen-{worker}"
        base.mkdir(parents=True, exist_ok=True)
        return SimpleNamespace(getbasetemp=lambda: base, mktemp=lambda name: base / name)

    builds = []

    def build(folder):
        builds.append(folder)
        if len(builds) == 1:
            raise RuntimeError("the first build fails")
        (folder / "index").write_text("built")

    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    with pytest.raises(RuntimeError):
        built_once(factory("gw0"), "idx", build)
    first = built_once(factory("gw0"), "idx", build)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert built_once(factory("gw1"), "idx", build) == first and len(builds) == 2
    assert (first / "index").read_text() == "built"
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    own = factory("solo").mktemp("idx")
    own.mkdir()
    assert built_once(SimpleNamespace(mktemp=lambda name: own), "idx", build) == own and len(builds) == 3


def _detached_sleeper() -> int:
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                            start_new_session=True).pid


def _write_state(home: Path, name: str, pid: int) -> Path:
    from veracity.config import Settings
    from veracity.serving.state import ServerState, state_path

    settings = Settings(home=home)
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    path = state_path(settings, name)
    path.write_text(ServerState(name, pid, "http://127.0.0.1:9/v1", "m", "m.gguf", 9, "log", time.time(),
                                ["llama-server"], "cpu", engine="llama.cpp").to_json())
    return path


def test_a_crashed_workers_servers_are_stopped_by_the_controller(tmp_path, monkeypatch):
    """A pytest-xdist worker that dies runs no finalizer, and its session llama-server (detached, as every
    managed server is) kept running after the session: the controller now stops what the dead worker's
    temporary folder records, and only that worker's."""
    from veracity.processes import pid_alive
    from veracity.serving.process import terminate_group

    monkeypatch.setattr(fx, "_SWEPT", [])
    monkeypatch.setattr(fx, "_WORKER_REPORTS", [])
    crashed, alive, other = _detached_sleeper(), _detached_sleeper(), _detached_sleeper()
    try:
        left = _write_state(tmp_path / "popen-gw1" / "llama-session0" / "home", "test", crashed)
        kept = _write_state(tmp_path / "popen-gw0" / "llama-session0" / "home", "test", alive)
        # the user's real home, linked from a test home as llama_home links engines: never followed
        user = tmp_path / "user"
        _write_state(user, "default", other)
        (tmp_path / "popen-gw1" / "llama-session0" / "home" / "engines").symlink_to(user)

        def node(worker: str) -> SimpleNamespace:
            factory = SimpleNamespace(getbasetemp=lambda: tmp_path)
            return SimpleNamespace(gateway=SimpleNamespace(id=worker), workeroutput={},
                                   config=SimpleNamespace(_tmp_path_factory=factory))

        fx.pytest_testnodedown(node("gw0"), None)  # a worker that ended normally: nothing swept
        assert pid_alive(alive) and pid_alive(crashed) and fx._SWEPT == []
        fx.pytest_testnodedown(node("gw1"), "worker 'gw1' crashed while running 'test_x'")
        assert not pid_alive(crashed) and not left.exists()
        assert fx._SWEPT == [f"gw1: test (pid {crashed})"]
        assert pid_alive(alive) and kept.exists() and pid_alive(other)
    finally:
        for pid in (crashed, alive, other):
            terminate_group(pid, 1.0)
