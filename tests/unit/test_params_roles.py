"""Typed method parameters and declared roles: validation before any server is contacted, per-role
budgets addressed the same way in every method, and role calls that trace their fallback."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from pydantic import BaseModel

from tests.unit.scripted_llm import ScriptedLLM
from veracity.errors import ConfigError, LLMOutputError
from veracity.pipeline.methods import METHODS, get_method
from veracity.pipeline.methods.base import MethodContext
from veracity.pipeline.params import MethodParams, build_params, param, param_infos
from veracity.pipeline.roles import Fallback, Role
from veracity.pipeline.types import Trace


@dataclass
class ToyParams(MethodParams):
    k: int = param(5, min=1, max=100, help="passages")
    ratio: float = param(0.5, min=0.0, max=1.0, help="a fraction")
    flag: bool = param(True, help="a switch")
    label: str = param("REFUTED", choices=("REFUTED", "SUPPORTED"), help="a label")
    path: str | None = param(None, help="optional path")
    titles: tuple[str, ...] = param((), help="titles")


def toy(overrides):
    return build_params("toy", ToyParams, overrides, ["judge", "planner"])


def test_strings_from_the_command_line_are_coerced_to_the_declared_types():
    p = toy({"k": "7", "ratio": "0.25", "flag": "false", "label": "SUPPORTED", "path": "null", "titles": "A"})
    assert (p.k, p.ratio, p.flag, p.label, p.path, p.titles) == (7, 0.25, False, "SUPPORTED", None, ("A",))
    assert toy({"titles": ["A", "B"]}).titles == ("A", "B")


@pytest.mark.parametrize("overrides, words", [
    ({"k": "abc"}, ["parameter k of toy", "integer", "1 to 100", "'abc'"]),
    ({"k": -3}, ["parameter k of toy", "1 to 100", "-3", "out of range"]),
    ({"k": 2.5}, ["parameter k", "integer"]),
    ({"k": True}, ["parameter k", "integer"]),
    ({"ratio": 1.5}, ["parameter ratio", "0 to 1", "out of range"]),
    ({"ratio": "nan"}, ["parameter ratio", "number"]),
    ({"flag": "maybe"}, ["parameter flag", "boolean"]),
    ({"label": "NEI"}, ["parameter label", "one of REFUTED, SUPPORTED"]),
    ({"nope": 1}, ["no parameter nope", ]),
    ({"judge.max_tokens": 0}, ["judge.max_tokens", "1 to 32768"]),
    ({"judge.max_tokens": "lots"}, ["judge.max_tokens", "integer"]),
    ({"judge.temperature": 3}, ["judge.temperature", "0 to 2"]),
    ({"critic.max_tokens": 10}, ["no role 'critic'", ]),
    ({"judge.top_p": 0.5}, ["no setting 'top_p'"]),
])
def test_a_bad_value_is_one_line_naming_the_parameter_and_its_range(overrides, words):
    with pytest.raises(ConfigError) as err:
        toy(overrides)
    message = str(err.value)
    assert "\n" not in message and err.value.hint
    for w in words:
        assert w in message or w in err.value.hint, (w, message, err.value.hint)


def test_a_renamed_parameter_names_its_replacement():
    with pytest.raises(ConfigError) as err:
        get_method("trification").make_params({"plan_max_tokens": 700})
    assert "planner.max_tokens" in err.value.hint


def test_role_settings_are_kept_per_role():
    p = toy({"judge.max_tokens": "300", "planner.temperature": "1"})
    assert p.roles == {"judge": {"max_tokens": 300}, "planner": {"temperature": 1.0}}


def test_every_method_declares_typed_documented_parameters_and_roles():
    for name, spec in METHODS.items():
        assert spec.roles, f"{name} declares no role"
        assert len({r.name for r in spec.roles}) == len(spec.roles), f"{name} declares a role twice"
        for r in spec.roles:
            assert r.name.startswith(name + "."), r.name
            assert r.max_tokens >= 1
            assert r.describe()["schema"]["type"] == "object"
        for info in param_infos(spec.params_cls):
            assert info.help, f"{name}.{info.name} has no help text"
        spec.make_params({})  # the defaults validate


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_rejects_bad_role_budgets_and_unknown_roles(name):
    spec = get_method(name)
    short = spec.roles[0].short
    assert spec.make_params({f"{short}.max_tokens": 17}).roles == {short: {"max_tokens": 17}}
    with pytest.raises(ConfigError):
        spec.make_params({f"{short}.max_tokens": -1})
    with pytest.raises(ConfigError):
        spec.make_params({"no_such_role.max_tokens": 10})


def test_integer_parameters_of_every_method_refuse_text_and_negative_values():
    checked = 0
    for spec in METHODS.values():
        for info in param_infos(spec.params_cls):
            if info.type == "an integer":
                with pytest.raises(ConfigError):
                    spec.make_params({info.name: "abc"})
                if info.range:
                    with pytest.raises(ConfigError):
                        spec.make_params({info.name: -3})
                checked += 1
    assert checked >= 10


# -- Role calls -----------------------------------------------------------------------------------------
class Out(BaseModel):
    answer: str


def render(question: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": question}]


ASK = Role("toy.ask", output=Out, render=render, max_tokens=64, temperature=0.7)
ASK_OR_NONE = Role("toy.ask_soft", output=Out, render=render, max_tokens=64,
                   fallback=Fallback(None, "treated as no answer"))


def ctx_for(llm, **overrides):
    params = build_params("toy", ToyParams, overrides, ["ask", "ask_soft"])
    return MethodContext(llm=llm, tools=None, trace=Trace(), params=params)


def test_a_role_call_sends_its_budget_and_temperature_and_per_run_overrides():
    llm = ScriptedLLM({"toy.ask": [Out(answer="a"), Out(answer="b")]})
    assert asyncio.run(ASK(ctx_for(llm), question="q")).answer == "a"
    assert (llm.calls[0].max_tokens, llm.calls[0].temperature, llm.calls[0].prompt) == (64, 0.7, "q")
    asyncio.run(ASK(ctx_for(llm, **{"ask.max_tokens": 99, "ask.temperature": 0}), question="q"))
    assert (llm.calls[1].max_tokens, llm.calls[1].temperature) == (99, 0.0)
    assert len(llm.usage) == 2  # the stand-in records usage like the real client


def test_an_invalid_reply_falls_back_traced_or_raises_without_a_fallback():
    llm = ScriptedLLM({"toy.ask_soft": [{"wrong": 1}], "toy.ask": [{"wrong": 1}]})
    ctx = ctx_for(llm)
    assert asyncio.run(ASK_OR_NONE(ctx, question="q", trace_info={"round": 2})) is None
    [event] = ctx.trace.events
    assert event["kind"] == "toy.agent_failed" and event["agent"] == "toy.ask_soft"
    assert event["fallback"] == "treated as no answer" and event["round"] == 2 and event["error"]
    with pytest.raises(LLMOutputError):
        asyncio.run(ASK(ctx, question="q"))


def test_a_trace_listener_hears_each_role_call_paired_and_the_trace_keeps_the_same_records():
    """The live-progress hook (veracity web's SSE stream): started / finished / failed per call, paired by
    step, with the prompt, the JSON reply, tokens and latency; parallel calls of one role keep their own
    usage; the trace's llm_calls are those a run without a listener records."""
    from veracity.serving.client import usage_scope

    async def run(listener):
        llm = ScriptedLLM({"toy.ask": lambda m: Out(answer=m[-1]["content"].upper()),
                           "toy.ask_soft": [{"wrong": 1}]},
                          delay=lambda call: 0.02 if call.prompt == "one" else 0.0)
        ctx = MethodContext(llm=llm, tools=None, trace=Trace(listener=listener), seed=5, claim_id="c",
                            params=build_params("toy", ToyParams, {}, ["ask", "ask_soft"]))
        seeds.append(llm)
        with usage_scope() as sink:
            ctx.trace.llm_calls = sink
            answers = await asyncio.gather(ASK(ctx, question="one"), ASK(ctx, question="two"))
            soft = await ASK_OR_NONE(ctx, question="three")
        return [a.answer for a in answers], soft, ctx.trace

    heard: list[dict] = []
    seeds: list = []
    answers, soft, trace = asyncio.run(run(heard.append))
    plain_answers, plain_soft, plain = asyncio.run(run(None))
    live, quiet = ({(c.role, c.prompt, c.seed) for c in llm.calls} for llm in seeds)
    # the listener keeps the request seeds
    assert live == quiet and all(seed is not None for _, _, seed in live)
    assert answers == plain_answers == ["ONE", "TWO"] and soft is plain_soft is None
    assert sorted(c.role for c in trace.llm_calls) == sorted(c.role for c in plain.llm_calls)
    assert len(trace.llm_calls) == len(plain.llm_calls) == 3 and trace.events == plain.events
    kinds = [(e["kind"], e.get("step")) for e in heard]
    # both agents started before either finished
    assert kinds[:2] == [("role.started", 1), ("role.started", 2)]
    finished = {e["step"]: e for e in heard if e["kind"] == "role.finished"}
    assert finished[1]["output"] == {"answer": "ONE"} and finished[2]["output"] == {"answer": "TWO"}
    assert heard.index(finished[2]) < heard.index(finished[1])  # "two" answered first (no delay)
    assert (finished[1]["attempts"] == 1 and finished[1]["prompt_tokens"] == 1
            and finished[1]["latency_s"] >= 0.02)
    started = {e["step"]: e for e in heard if e["kind"] == "role.started"}
    assert started[1]["messages"] == [{"role": "user", "content": "one"}] and started[1]["max_tokens"] == 64
    failed = [e for e in heard if e["kind"] == "role.failed"]
    assert (len(failed) == 1 and failed[0]["role"] == "toy.ask_soft"
            and "did not validate" in failed[0]["error"])
    # the fallback's trace event is heard too, after the failure
    assert heard[-1]["kind"] == "toy.agent_failed" and heard.index(failed[0]) < len(heard) - 1
