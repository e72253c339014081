"""The file parsers load where there is no Django: a fresh interpreter, with no settings
module named, imports every module of `formats` and has neither Django nor RQ loaded.
lint-imports forbids the imports it can see; this sees what actually runs."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

IMPORT_EVERY_FORMAT_MODULE = """
import importlib, pkgutil, sys
import formats
for module in pkgutil.walk_packages(formats.__path__, "formats."):
    importlib.import_module(module.name)
loaded = [name for name in ("django", "rq") if name in sys.modules]
sys.exit(f"importing formats loaded {', '.join(loaded)}" if loaded else 0)
"""


def test_the_format_modules_load_neither_django_nor_rq():
    env = {name: value for name, value in os.environ.items() if name != "DJANGO_SETTINGS_MODULE"}

    done = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERY_FORMAT_MODULE],
        cwd=ROOT,  # where `formats` is first on sys.path
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
