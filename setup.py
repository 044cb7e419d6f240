"""recjudge's build step beyond pyproject.toml: the shipped prompt templates.

The templates live in the repository's top-level ``prompts/`` (an editable install reads them
there, see ``recjudge.judging.prompts.prompts_dir``); a wheel carries them as ``recjudge/prompts``.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPy(build_py):
    """Put the repository's prompts/ into the wheel as recjudge/prompts (templates are data)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the repository's prompts/ (judging.prompts.prompts_dir)
        dest = Path(self.build_lib) / "recjudge" / "prompts"
        dest.mkdir(parents=True, exist_ok=True)
        for f in (HERE / "prompts").iterdir():
            if f.is_file():
                shutil.copy2(f, dest / f.name)


setup(cmdclass={"build_py": BuildPy})
