"""The 24+-program suite of issue 19: real model layers built with the public API (see programs.py)."""
from .kinds import BUILDERS, LIBRARIES
from .programs import PROGRAMS, SuiteProgram, by_name, select

__all__ = ["BUILDERS", "LIBRARIES", "PROGRAMS", "SuiteProgram", "by_name", "select"]
