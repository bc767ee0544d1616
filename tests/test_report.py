"""The benchmarks page, its plots and README's figures are rendered from the recorded results.

Fast and without MindSpore: ``python -m benchmarks.report --check`` renders to memory and
compares with the committed files.
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.common import PROVENANCE_KEYS, provenance, results_path, write_results
from benchmarks.report import END, PAGE, PLOTS, README, RESULTS, START, main

ROOT = Path(__file__).resolve().parents[1]


def copy_of_repo(tmp_path: Path) -> Path:
    """The files the report reads and writes, copied under ``tmp_path``."""
    for folder in (RESULTS, PLOTS):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    for path in (PAGE, README):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / path, tmp_path / path)
    return tmp_path


def test_check_passes_on_the_repository_without_importing_mindspore():
    script = ("import sys; from benchmarks.report import main; code = main(['--check']); "
              "assert 'mindspore' not in sys.modules, 'the check imported mindspore'; sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_changed_figure_in_a_result_fails_the_check_naming_the_page(tmp_path, capsys):
    root = copy_of_repo(tmp_path)
    assert main(["--check", "--root", str(root)]) == 0
    path = root / RESULTS / "dqn_solve.json"
    data = json.loads(path.read_text())
    data["evaluation"]["ratio"] += 1.0
    path.write_text(json.dumps(data, indent=2))
    capsys.readouterr()
    assert main(["--check", "--root", str(root)]) == 1
    err = capsys.readouterr().err
    assert f"{PAGE}:" in err and "rendered:" in err


def test_a_hand_edit_of_the_page_or_the_readme_block_fails_the_check_at_its_line(tmp_path, capsys):
    root = copy_of_repo(tmp_path)
    page = root / PAGE
    lines = page.read_text().splitlines(keepends=True)
    number = next(i for i, line in enumerate(lines) if line.startswith("| insert 1 (W1)"))
    lines[number] = lines[number].replace("|", "| 1", 2)
    page.write_text("".join(lines))
    assert main(["--check", "--root", str(root)]) == 1
    assert f"{PAGE}:{number + 1}:" in capsys.readouterr().err
    shutil.copy(ROOT / PAGE, page)
    readme = root / README
    text = readme.read_text()
    readme.write_text(text.replace(START + "\n", START + "\n- a typed figure: 9.99x\n"))
    assert main(["--check", "--root", str(root)]) == 1
    assert f"{README}:" in capsys.readouterr().err


def test_a_changed_or_stale_plot_fails_the_check(tmp_path, capsys):
    root = copy_of_repo(tmp_path)
    plot = next((root / PLOTS).glob("*.png"))
    plot.write_bytes(plot.read_bytes() + b"\0")
    assert main(["--check", "--root", str(root)]) == 1
    assert str(plot.relative_to(root)) in capsys.readouterr().err
    plot.unlink()
    (root / PLOTS / "old.png").write_bytes(b"")
    assert main(["--check", "--root", str(root)]) == 1
    err = capsys.readouterr().err
    assert "missing" in err and "old.png: not rendered" in err


def test_the_report_writes_only_between_the_readme_markers(tmp_path):
    root = copy_of_repo(tmp_path)
    readme = root / README
    before, after = readme.read_text().split(START)[0], readme.read_text().split(END)[1]
    readme.write_text(before + START + "\nstale\n" + END + after)
    (root / PAGE).unlink()
    assert main(["--root", str(root)]) == 0
    text = readme.read_text()
    assert text.startswith(before + START) and text.endswith(END + after) and "stale" not in text
    block = text.split(START)[1].split(END)[0].strip().splitlines()
    assert 1 <= len(block) <= 4 and all(line.startswith("- ") and "commit" in line for line in block)
    assert main(["--check", "--root", str(root)]) == 0


def test_every_recorded_result_has_its_run_provenance():
    files = sorted((ROOT / RESULTS).glob("*.json"))
    assert files and not [path for path in (ROOT / RESULTS).iterdir() if path.is_dir()]  # one folder, no history
    for path in files:
        run = json.loads(path.read_text())["run"]
        assert set(PROVENANCE_KEYS) <= set(run), path.name
        if run["date"] is None or run["numpy"] is None:
            assert run["recorded_before_provenance"] is True, path.name


def test_a_tree_is_dirty_for_changed_code_not_for_recorded_results(tmp_path, monkeypatch):
    from benchmarks import common

    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    code, recorded = tmp_path / "benchmarks" / "bench.py", tmp_path / "benchmarks" / "results" / "bench.json"
    code.write_text("x = 1\n")
    recorded.write_text("{}\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c"]):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)
    monkeypatch.setattr(common, "ROOT", tmp_path)
    monkeypatch.setattr(common, "RESULTS", tmp_path / "benchmarks" / "results")
    assert provenance([])["dirty"] is False
    recorded.write_text('{"figure": 1}\n')  # an earlier benchmark of the same commit recorded its run
    assert provenance([])["dirty"] is False
    code.write_text("x = 2\n")
    assert provenance([])["dirty"] is True


def test_provenance_names_the_commit_the_versions_the_cpu_and_the_command(tmp_path):
    run = provenance(["--smoke"])
    assert set(run) == set(PROVENANCE_KEYS)
    assert run["date"].endswith("+00:00") and run["commit"] and run["python"].count(".") == 2
    assert run["cpu"] and run["cpu_count"] >= 1 and len(run["load_average"]) == 3
    assert run["command"].startswith("python ") and run["command"].endswith(" --smoke")
    assert results_path("x", None, smoke=True) is None  # a smoke run records nothing unless told where
    path = results_path("x", tmp_path / "out")
    write_results({"run": run, "figure": 1.0}, path)
    assert json.loads(path.read_text())["run"] == run
    with pytest.raises(ValueError, match="provenance"):
        write_results({"figure": 1.0}, path)
