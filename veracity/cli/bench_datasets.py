"""`veracity bench datasets`: the registered benchmark datasets, their variants, files and label sets."""

from __future__ import annotations

import click

from veracity.cli._common import console, print_json, print_table


@click.command("datasets")
@click.option("--count", is_flag=True, help="Read each variant's files and show its claims per label "
              "(a variant whose files are absent shows why).")
@click.option("--data-dir", default=None,
              help="Folder with the datasets in their official layout, for --count "
              "(default: $VERACITY_DATA_DIR).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def datasets_cmd(count: bool, data_dir: str | None, as_json: bool) -> None:
    """List the datasets `bench run --dataset` accepts: variants, files, label sets, release dates.

    Each variant is one set of official files read with one label mapping; `*` marks the default
    variant. Its label space (binary: SUPPORTED / REFUTED, or 3way) is what `bench run` verifies its
    claims in unless --labels says otherwise. The release date is what the leakage guard compares with the
    index's dump date.

    \b
    Examples:
      veracity bench datasets
      veracity bench datasets --count --data-dir ../shared/data
      veracity bench datasets --json | jq '.[].name'
    """
    from veracity.bench.datasets import describe_datasets, describe_datasets_on_disk

    if count:
        with console.status("reading the datasets") as status:
            records = describe_datasets_on_disk(data_dir, progress=lambda s: status.update(s))
    else:
        records = describe_datasets()
    if as_json:
        print_json(records)
        return
    columns = ["dataset", "variant", "labels", "label space", "files", "released"]
    if count:
        columns.append("claims")
    rows = []
    for rec in records:
        for name, var in rec["variants"].items():
            row = [rec["name"], name + (" *" if name == rec["default_variant"] else ""),
                   "/".join(var["labels"]), var["label_space"],
                   ", ".join(f"{rec['folder']}/{f}" for f in var["files"]), var["created"]]
            if count:
                row.append(_counts(var))
            rows.append(row)
    print_table("benchmark datasets (* = default variant)", columns, rows)


def _counts(var: dict) -> str:
    if "error" in var:
        return var["error"]
    per_label = ", ".join(f"{lab} {n}" for lab, n in var["label_counts"].items())
    return f"{var['n_claims']} ({per_label})"


COMMANDS = [datasets_cmd]
