"""A role has one prompt: its declared instructions are the system message it sends, its renderer builds
the turns after it, and `veracity methods show --prompts` prints that system message (issue 30, point 4)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from veracity.cli import _register, cli
from veracity.pipeline.methods import METHODS
from veracity.pipeline.roles import Role

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "role_prompts.py"
_register()


def _cases() -> dict[str, list[dict[str, str]]]:
    spec = importlib.util.spec_from_file_location("role_prompts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.cases()


ALL_ROLES = {role.name: role for spec in METHODS.values() for role in spec.roles}


def test_every_role_has_a_fixed_input_case_and_sends_one_system_message_first():
    cases = _cases()
    covered = {name.split("/")[0] for name in cases}
    assert covered == set(ALL_ROLES)  # the before/after proof renders every declared role
    for name, msgs in cases.items():
        roles = [m["role"] for m in msgs]
        assert roles[0] == "system" and roles.count("system") == 1, name
        assert msgs[0]["content"].strip(), name


@pytest.mark.parametrize("case", ["direct.judge/3way", "rag.judge/3way", "rag.select",
                                  "mermaid.executor/3way",
                                  "mermaid.final/3way", "mermaid.decomposer", "emulate.classifier",
                                  "emulate.search_rank", "trification.planner/SEARCH+REFINE+THINK+JUDGE/True",
                                  "trification.judge", "zofia.linguist", "zofia.pro"])
def test_the_system_message_sent_is_what_methods_show_prints(case):
    """With the default inputs (3-way labels, every node type) the system message sent
    is exactly the role's described instructions."""
    msgs = _cases()[case]
    described = ALL_ROLES[case.split("/")[0]].describe()
    assert msgs[0]["content"] == described["instructions"]


def test_instructions_that_depend_on_the_call_name_their_inputs():
    described = {r.name: r.describe() for r in ALL_ROLES.values()}
    assert described["rag.judge"]["instructions_vary_with"] == ["space", "quoting"]
    assert described["rag.select"]["instructions_vary_with"] == []
    assert described["zofia.expert"]["instructions_vary_with"] == ["expert_role"]
    assert "renowned {expert_role}" in described["zofia.expert"]["instructions"]
    judge = described["zofia.judge"]  # an input without a default is shown as {its name}
    assert judge["instructions"].replace("{max_rounds}", "5") == _cases()["zofia.judge"][0]["content"]
    # EMULATE: one system message for all seven agents; each agent's task ends its user turn
    assert len({described[n]["instructions"] for n in described if n.startswith("emulate.")}) == 1
    assert _cases()["emulate.classifier"][1]["content"].endswith(described["emulate.classifier"]["task"])


class Out(BaseModel):
    answer: str


def test_a_renderer_that_returns_a_system_message_is_refused():
    bad = Role("toy.bad", output=Out, instructions="be brief",
               render=lambda q: [{"role": "system", "content": "again"}, {"role": "user", "content": q}])
    with pytest.raises(ValueError, match="belongs in the instructions"):
        bad.messages(q="?")


def test_an_input_neither_the_instructions_nor_the_renderer_names_is_refused():
    def instructions(tone: str) -> str:
        return f"Answer in a {tone} tone."

    role = Role("toy.ask", output=Out, instructions=instructions, render=lambda q: [{"role": "user",
                                                                                     "content": q}])
    assert role.messages(q="why?", tone="dry") == [{"role": "system", "content": "Answer in a dry tone."},
                                                    {"role": "user", "content": "why?"}]
    with pytest.raises(TypeError, match="toneee"):
        role.messages(q="why?", tone="dry", toneee="x")


def test_methods_show_prompts_prints_each_roles_system_message():
    result = CliRunner().invoke(cli, ["methods", "show", "rag", "--prompts"])
    assert result.exit_code == 0, result.output
    assert "== rag.judge: system message (depends on space" in result.output
    assert ALL_ROLES["rag.select"].describe()["instructions"] in result.output
    record = json.loads(CliRunner().invoke(cli, ["methods", "show", "emulate", "--json"]).output)
    classifier = next(r for r in record["roles"] if r["name"] == "emulate.classifier")
    assert classifier["instructions"] == ALL_ROLES["emulate.initial_query_gen"].describe()["instructions"]


@pytest.mark.parametrize("method,role,words", [
    ("mermaid", "mermaid.executor", "Observation:\n{observation}\n\nStep 2 of at most 5: choose an action."),
    ("trification", "trification.planner",
     "This verification graph is invalid and was not executed:\n- {rule broken}"),
    ("zofia", "zofia.pro", "Con's arguments:\nRebuttal: {rebuttal}\n- {point}"),
    ("zofia", "zofia.con", "Pro's arguments:\nRebuttal: {rebuttal}\n- {point}"),
    ("rag", "rag.judge", "Your quotes must be copied word for word"),
])
def test_the_turns_a_conversation_continues_with_are_declared_and_shown(method, role, words):
    """Every text a method sends lives in a role: the later turns (observations, debate rounds, the request
    for a corrected plan, the quote retry) are declared with the role, sent through that declaration, and
    printed by --prompts."""
    turns = ALL_ROLES[role].turns
    assert turns and any(words in t.shown() for t in turns)
    result = CliRunner().invoke(cli, ["methods", "show", method, "--prompts"])
    assert result.exit_code == 0, result.output
    assert words in result.output and "-- turn " in result.output
