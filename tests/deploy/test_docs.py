"""The documentation: the mkdocs-material site builds with --strict (broken links and anchors fail
it), and the README links only files inside the repository and says first how to install."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .support import ROOT, venv_tool

# What fits on a first screen of the rendered README.
FIRST_SCREEN_LINES = 40


def test_site_builds_strictly(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(venv_tool("mkdocs")), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for page in ("install", "operations", "configuration"):
        assert (tmp_path / "site" / page / "index.html").is_file()


def test_readme_links_only_files_inside_the_repository() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    for link in links:
        assert not re.match(r"[a-z]+:", link), f"README links outside the repository: {link}"
        target = (ROOT / link.partition("#")[0]).resolve()
        assert target.is_relative_to(ROOT), f"README links outside the repository: {link}"
        assert target.exists(), f"README links a missing file: {link}"


def test_readme_says_first_how_to_install_in_a_cluster() -> None:
    first_screen = "\n".join(
        (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:FIRST_SCREEN_LINES]
    )
    assert "## Install it in a cluster" in first_screen
    assert "kubectl apply -k" in first_screen and "deploy/kustomize/overlays/single" in first_screen
    assert "docs/install.md" in first_screen


# The demo grows (more kinds of workload, more channels): the README shows an excerpt of a real run
# but states no count of what it sent, which went stale with each addition ("12 summaries in 9
# e-mails" while the demo sent 27 and 5 nudges in 26); the demo's own last lines give the counts.
DEMO_COUNTS = re.compile(
    r"\b\d+ (?:job summaries|summaries|e-mails|idle nudges|nudges)\b|delivered in|real run, \d+ jobs"
)


def test_readme_states_no_demo_counts_that_drift() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    demo = text[text.index("`make demo` plays") : text.index("## Run it")]
    assert "```" in demo, "the README shows an excerpt of a real demo run"
    assert DEMO_COUNTS.findall(demo) == []


def test_readme_layout_names_every_adapter_and_benchmark() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = text[text.index("## Layout") :]
    adapters = [
        p.name for p in (ROOT / "inno_notify" / "adapters").iterdir() if p.is_dir() and p.name[0] != "_"
    ]
    benches = [p.name for p in (ROOT / "bench").iterdir() if p.suffix in (".py", ".sh") and p.name[0] != "_"]
    missing = [name for name in sorted(adapters + benches) if f"`{name}`" not in layout]
    assert missing == []


# Paths that would only resolve on a developer's machine, with the project's shared notes beside the
# checkout: a fresh clone has nothing beside it (CI clones into an empty directory).
OUTSIDE = re.compile(r"\.\./shared\b|/work/shared\b|\bshared/(fixtures|CONTRACT|FACTS|DESIGN|STYLE)\b")


def test_no_tracked_file_refers_to_files_outside_the_repository() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
    ).stdout.split(b"\0")
    found = []
    for name in filter(None, tracked):
        path = ROOT / name.decode()
        # The captures' README names where each capture was taken from (provenance, not a path), and
        # this file spells the patterns it looks for.
        if path.suffix not in {".py", ".md", ".yaml", ".yml", ".toml", ".cfg", ".txt", ""} or path in {
            ROOT / "tests" / "fixtures" / "README.md",
            Path(__file__).resolve(),
        }:
            continue
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            found += [f"{name.decode()}: {m.group(0)}" for m in OUTSIDE.finditer(text)]
    assert not found, "files outside the repository are referred to:\n" + "\n".join(found)


def test_every_row_of_the_threat_model_names_tests_that_exist() -> None:
    """docs/hardening.md's threat model: each row names tests (`path::name`, or `::name` in the file
    named before it in the same cell), and each one is defined there."""
    text = (ROOT / "docs" / "hardening.md").read_text()
    table = text.split("## Threat model", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) >= 10
    for row in rows:
        cell = row.rstrip(" |").rsplit(" | ", 1)[1]
        named = re.findall(r"`([^`]*)`", cell)
        assert named, row
        path: Path | None = None
        for item in named:
            file, _, test = item.partition("::")
            if file:
                path = ROOT / file.split(" ")[0]
                assert path.exists(), item
            if test:
                assert path is not None and path.suffix == ".py", item
                name = test.split("[")[0]
                assert re.search(rf"^(async )?def {re.escape(name)}\b", path.read_text(), re.M), item
