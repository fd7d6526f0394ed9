"""Every "design §N" in code, output, plots and docs names a section of docs/design.md."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"
CITATION = re.compile(r"\bdesign (§\d+(?:\.\d+)?(?:(?:, | and | or |–)§\d+(?:\.\d+)?)*)", re.IGNORECASE)
SECTION = re.compile(r"§(\d+(?:\.\d+)?)")
HEADING = re.compile(r"^#{2,4} (\d+(?:\.\d+)?)\.? ", re.MULTILINE)


def design_sections(text: str) -> set[str]:
    return set(HEADING.findall(text))


def citations(text: str) -> list[str]:
    return [number for match in CITATION.finditer(text) for number in SECTION.findall(match.group(1))]


def tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "*.py", "*.md", "*.sh", "*.txt", "*.json"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in names if (ROOT / name).is_file() and ROOT / name != Path(__file__).resolve()]


def test_the_parsers_read_headings_and_citation_lists():
    assert design_sections("## 4. Cost model\n### 4.5 Lower bounds\n## 10. At scale\n") == {"4", "4.5", "10"}
    assert citations("see design §2, §7 and design §4.5; DESIGN §9") == ["2", "7", "4.5", "9"]


def test_design_is_a_reference_of_at_most_900_lines():
    assert len(DESIGN.read_text().splitlines()) <= 900


def test_design_has_sections_1_to_10_in_order():
    numbers = [n for n in HEADING.findall(DESIGN.read_text()) if "." not in n]
    assert numbers[:10] == [str(i) for i in range(1, 11)]
    assert numbers == [str(i) for i in range(1, len(numbers) + 1)]


def test_every_design_reference_points_to_an_existing_section():
    sections = design_sections(DESIGN.read_text())
    found, broken = 0, []
    for path in tracked_text_files():
        text = path.read_text(errors="replace")
        for number in citations(text):
            found += 1
            if number not in sections:
                broken.append(f"{path.relative_to(ROOT)}: design §{number}")
        if "DESIGN §" in text or "shared/DESIGN" in text:
            broken.append(f"{path.relative_to(ROOT)}: cites DESIGN, not docs/design.md")
    assert found > 30
    assert broken == []
