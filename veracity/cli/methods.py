"""`veracity methods list` / `methods show NAME`: every method's roles, parameters and ablations, read
from the declared objects themselves (so the listing cannot drift from the code)."""

from __future__ import annotations

import click

from veracity.cli._common import console, print_json, print_table


def _ablations(name: str) -> list[str]:
    from veracity.pipeline.methods import ABLATIONS

    return [f"--{flag}" for flag, (owner, *_rest) in ABLATIONS.items() if owner == name]


def method_record(name: str, with_schema: bool = True) -> dict:
    """One method as JSON: summary, roles (schema, budget, temperature, fallback), parameters, ablations."""
    from dataclasses import asdict

    from veracity.check import STAGE
    from veracity.pipeline.methods import get_method
    from veracity.pipeline.params import param_infos

    spec = STAGE if name == STAGE.name else get_method(name)  # the check stage's roles are listed too
    roles = []
    for role in spec.roles:
        r = role.describe()
        if not with_schema:
            r.pop("schema", None)
            r.pop("instructions", None)
            r.pop("turns", None)
        roles.append(r)
    return {
        "name": spec.name,
        "summary": spec.summary,
        "needs_index": spec.needs_index,
        "run_state": spec.state_cls.__name__ if spec.state_cls else None,
        "roles": roles,
        "parameters": [asdict(p) for p in param_infos(spec.params_cls)],
        "role_settings": ["ROLE.max_tokens (1-32768)", "ROLE.temperature (0-2)"],
        "ablations": _ablations(spec.name),
    }


def methods_markdown_table() -> str:
    """The README's methods table, generated from the method registry."""
    from veracity.pipeline.methods import METHODS

    lines = ["| `--method` | what runs | roles (`--param ROLE.max_tokens=N`) | ablations |",
             "|---|---|---|---|"]
    for name, spec in METHODS.items():
        roles = ", ".join(f"`{r.short}`" for r in spec.roles)
        abl = ", ".join(f"`{a}`" for a in _ablations(name))
        lines.append(f"| `{name}` | {spec.summary} | {roles} | {abl} |")
    return "\n".join(lines) + "\n"


@click.group()
def methods() -> None:
    """The verification methods: their agent roles, parameters and ablations."""


@methods.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--markdown", is_flag=True, help="Print the README's methods table (Markdown).")
def list_methods(as_json: bool, markdown: bool) -> None:
    """List the methods with their roles and ablations.

    \b
    Examples:
      veracity methods list
      veracity methods list --json | jq '.[].roles[].name'
    """
    from veracity.pipeline.methods import METHODS

    if markdown:
        click.echo(methods_markdown_table(), nl=False)
        return
    records = [method_record(name, with_schema=False) for name in METHODS]
    if as_json:
        print_json(records)
        return
    print_table("methods", ["method", "roles", "index", "run state", "ablations", "summary"],
                [[r["name"], ", ".join(x["short"] for x in r["roles"]), "yes" if r["needs_index"] else "no",
                  r["run_state"] or "-", " ".join(r["ablations"]) or "-", r["summary"]] for r in records])


@methods.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (with each role's full output schema).")
@click.option("--prompts", is_flag=True,
              help="Also print each role's system message exactly as it is sent, and "
                                             "the later turns its conversation continues with.")
def show_method(name: str, as_json: bool, prompts: bool) -> None:
    """Show one method: each role with its output schema, token budget, temperature and fallback, then
    its parameters with defaults and valid ranges (--prompts: and each role's system message).

    \b
    Examples:
      veracity methods show trification
      veracity methods show rag --prompts
      veracity methods show emulate --json
    """
    rec = method_record(name.lower())
    if as_json:
        print_json(rec)
        return
    if console.is_terminal:
        console.print(f"[bold]{rec['name']}[/]: {rec['summary']}")
        if rec["run_state"]:
            console.print(f"run state: {rec['run_state']} (kept across the claims of a run, under "
                          "--state-dir)")
    print_table(f"{rec['name']} roles", ["role", "output", "max_tokens", "temperature", "fields", "fallback"],
                [[r["name"], r["output"], str(r["max_tokens"]),
                  "client default" if r["temperature"] is None else f"{r['temperature']:g}",
                  _fields(r["schema"]), r["fallback"] or "none (the claim fails)"] for r in rec["roles"]])
    print_table(f"{rec['name']} parameters (--param NAME=VALUE; per role: ROLE.max_tokens, ROLE.temperature)",
                ["parameter", "type", "default", "valid", "help", "paper"],
                [[p["name"], p["type"], _default(p["default"]), p["range"] or "-", p["help"],
                  p["paper"] or ""]
                 for p in rec["parameters"]])
    if prompts:
        for r in rec["roles"]:
            vary = r["instructions_vary_with"]
            note = (f" (depends on {', '.join(vary)}: shown with their defaults, {{NAME}} where none)"
                    if vary else "")
            click.echo(f"\n== {r['name']}: system message{note}\n{r['instructions']}")
            if r.get("task"):
                click.echo(f"-- the user turn ends with this task:\n{r['task']}")
            for t in r.get("turns") or []:
                click.echo(f"-- turn {t['name']} ({t['when']}):\n{t['text']}")


def _default(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def _fields(schema: dict) -> str:
    """``label: SUPPORTED|REFUTED|NOT_ENOUGH_INFO, explanation: string, ...`` from a JSON schema."""
    out = []
    for key, prop in (schema.get("properties") or {}).items():
        if "enum" in prop:
            kind = "|".join(map(str, prop["enum"]))
        elif "anyOf" in prop:
            kind = "|".join(str(a.get("enum", [a.get("type", "?")])[0]) if "enum" in a else a.get("type", "?")
                            for a in prop["anyOf"])
        else:
            kind = prop.get("type", "?")
            if kind == "array":
                kind = f"list of {(prop.get('items') or {}).get('type', 'object')}"
        out.append(f"{key}: {kind}")
    return ", ".join(out)


COMMANDS = [methods]
