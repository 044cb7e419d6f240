"""recjudge's build step beyond pyproject.toml: the compiled inner loops and the shipped prompts.

``recjudge._native`` (src/recjudge/_native.c: the TREC tokenizer and the judgments join) is
optional: where no C compiler is found the install goes on, and recjudge reads with pyarrow or
pandas and joins with numpy (same results, slower; ``recjudge compare`` says which reader it used).
"""

import shutil
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildPy(build_py):
    """Put the repository's prompts/ into the wheel as recjudge/prompts (templates are data)."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads the repository's prompts/ (judge.prompts.prompts_dir)
        dest = Path(self.build_lib) / "recjudge" / "prompts"
        dest.mkdir(parents=True, exist_ok=True)
        for f in (HERE / "prompts").iterdir():
            if f.is_file():
                shutil.copy2(f, dest / f.name)


native = Extension(
    "recjudge._native",
    sources=["src/recjudge/_native.c"],
    extra_compile_args=[] if sys.platform == "win32" else ["-O2", "-std=c99"],
    optional=True,
)

setup(ext_modules=[native], cmdclass={"build_py": BuildPy})
