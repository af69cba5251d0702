"""Start-up shared by the harnesses: Django settings first (the parser reads one)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")


def django() -> None:
    import django as dj

    dj.setup()
