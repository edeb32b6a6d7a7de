"""Build vigil-sdk from the repository's own producers/ and schemas/ (see pyproject.toml), as they are.

``producers`` becomes ``vigil.sdk`` and ``schemas`` becomes ``vigil.schemas``, the name the full distribution gives
it: producers/ imports its own modules relatively and the contracts as ``vigil.schemas``, so no source is rewritten.
Nothing else of the repository (worker/, the DDL) is in the wheel.
"""

from setuptools import setup

PACKAGES = {"vigil.sdk": "..", "vigil.schemas": "../../schemas", "vigil.schemas.conventions": "../../schemas/conventions"}

setup(packages=list(PACKAGES), package_dir=PACKAGES)
