"""README opens with the two commands; CI runs the second one verbatim."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", (ROOT / "README.md").read_text())[:2]


def test_readme_opens_with_setup_demo_and_setup_test():
    demo, test = readme_commands()
    assert "examples/demo.sh" in demo and "pip install" in demo
    assert "pytest" in test and "pip install" in test


def test_ci_runs_readmes_test_command_verbatim():
    assert readme_commands()[1] in (ROOT / ".ci" / "run").read_text().splitlines()


def test_every_cli_command_in_readme_exists():
    documented = set(re.findall(r"^\| `hydraulis ([a-z][a-z-]*(?: [a-z][a-z-]*)?)", (ROOT / "README.md").read_text(), re.M))
    for command in documented:
        result = subprocess.run([sys.executable, "-m", "hydraulis", *command.split(), "--help"],
                                capture_output=True, text=True)
        assert result.returncode == 0, (command, result.stderr)


def test_ci_installs_chromium_for_the_browser_tests_before_the_test_command():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    install = next(i for i, line in enumerate(lines) if "apt-get install" in line and "chromium" in line)
    assert install < lines.index(readme_commands()[1])
