"""scripts/house-gates passes on this repository and fails, naming the place, on a tree that breaks
each gate: a file over 500 lines, a function over 80, a line the formatter would change."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
GATES = os.path.join(ROOT, "scripts", "house-gates")


def gates(root, only):
    return subprocess.run([sys.executable, GATES, root, "--only", only], capture_output=True, text=True, timeout=300)


def test_this_repository_passes_the_file_and_function_gates():
    for only in ("files", "functions"):
        result = gates(ROOT, only)
        assert result.returncode == 0, result.stderr


def tree(tmp_path, text):
    (tmp_path / "Sources" / "M").mkdir(parents=True)
    shutil.copy(os.path.join(ROOT, ".swift-format"), tmp_path / ".swift-format")
    (tmp_path / "Sources" / "M" / "A.swift").write_text(text)
    return str(tmp_path)


def test_a_file_over_500_lines_fails(tmp_path):
    root = tree(tmp_path, "let a = 1\n" * 501)
    result = gates(root, "files")
    assert result.returncode == 1 and "Sources/M/A.swift:1: 501 lines; allowed: at most 500" in result.stderr
    generated = tmp_path / "Sources" / "M" / "B.generated.swift"
    generated.write_text("let b = 1\n" * 900)
    (tmp_path / "Sources" / "M" / "A.swift").write_text("let a = 1\n")
    assert gates(root, "files").returncode == 0


def test_a_function_over_80_lines_fails_and_braces_in_strings_do_not_count(tmp_path):
    body = "".join(f"    let x{i} = \"{{ }} }}\"  // }} {{\n" for i in range(78))
    root = tree(tmp_path, "struct S {\n    func ok() {\n" + body + "    }\n}\n")
    assert gates(root, "functions").returncode == 0  # 80 lines: the declaration, 78, the closing brace
    (tmp_path / "Sources" / "M" / "A.swift").write_text(
        "struct S {\n    @discardableResult\n    public static func long() -> Int {\n" + body + "        return 1\n    }\n}\n")
    result = gates(root, "functions")
    assert result.returncode == 1 and "Sources/M/A.swift:3: func long is 81 lines" in result.stderr


@pytest.mark.skipif(shutil.which("swift") is None, reason="the format gate needs the toolchain's swift format")
def test_a_line_over_120_columns_fails_the_format_gate(tmp_path):
    root = tree(tmp_path, "let a = [" + ", ".join(str(i) for i in range(60)) + "]\n")
    result = gates(root, "format")
    assert result.returncode == 1 and "A.swift:1" in result.stderr and "LineLength" in result.stderr
    (tmp_path / "Sources" / "M" / "A.swift").write_text("let a = 1\n")
    assert gates(root, "format").returncode == 0
