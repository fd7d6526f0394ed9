"""README opens with the two commands (CI runs the second one verbatim), stays short, and its tour and
links work; docs/cli.md documents every command (tests/cli/test_reference.py)."""

import re
from pathlib import Path

from tests.cli.helpers import hydraulis, hydraulis_process

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", (ROOT / "README.md").read_text())[:2]


def test_readme_opens_with_setup_demo_and_setup_test():
    demo, test = readme_commands()
    assert "examples/demo.sh" in demo and "pip install" in demo
    assert "pytest" in test and "pip install" in test


def test_ci_runs_readmes_test_command_verbatim():
    assert readme_commands()[1] in (ROOT / ".ci" / "run").read_text().splitlines()


def test_readme_is_a_newcomers_page_whose_links_resolve():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 120
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert {"docs/design.md", "docs/cli.md", "docs/guide.md"} <= set(links)
    assert [link for link in links if not (ROOT / link).exists()] == []


def test_every_command_of_the_quick_tour_exists():
    tour = re.search(r"## Quick tour\n.*?```bash\n(.+?)\n```", (ROOT / "README.md").read_text(), re.S).group(1)
    commands = re.findall(r"^\.venv/bin/hydraulis ([a-z-]+(?: [a-z-]+)?)", tour, re.M)
    assert {"profile", "propose", "plan-step", "train", "serve"} <= {c.split()[0] for c in commands}
    for command in commands:
        words = command.split() if command.split()[0] in ("space", "data") else command.split()[:1]
        result = hydraulis(*words, "--help")
        assert result.returncode == 0, (command, result.stderr)


def test_python_dash_m_hydraulis_is_the_cli():
    """The one run of the entry point itself; the other CLI tests call ``hydraulis.cli.main``."""
    result = hydraulis_process("--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: hydraulis ")


def test_ci_installs_chromium_for_the_browser_tests_before_the_test_command():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    install = next(i for i, line in enumerate(lines) if "apt-get install" in line and "chromium" in line)
    assert install < lines.index(readme_commands()[1])


def test_ci_lints_with_ruff_before_the_test_command():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    lint = next(i for i, line in enumerate(lines) if ".venv/bin/python -m ruff check ." in line)
    assert lint < lines.index(readme_commands()[1])
    assert "[tool.ruff.lint]" in (ROOT / "pyproject.toml").read_text()


def test_pyproject_readme_and_constraints_name_the_torch_floor_of_the_varlen_kernel():
    from hydraulis.runtime.model.attention import VARLEN_TORCH

    floor = f"torch>={VARLEN_TORCH}"
    assert f'"{floor}"' in (ROOT / "pyproject.toml").read_text()
    assert floor in (ROOT / "README.md").read_text()
    assert floor in (ROOT / ".ci" / "constraints.txt").read_text()
