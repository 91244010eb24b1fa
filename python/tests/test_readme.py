"""The README's Python example runs as written."""
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_readme_python_example_runs():
    section = README.read_text().split("## Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1 and len(blocks[0].splitlines()) <= 12
    exec(compile(blocks[0], str(README), "exec"), {})
