"""One import name, ``vigil``, mapped from the folders the design fixes: ``vigil.schemas`` is ``schemas/``,
``vigil.producers`` is ``producers/``, ``vigil.worker`` is ``worker/``. Nothing named ``worker`` or ``schemas`` lands in
site-packages, and ``vigil`` itself is a namespace that the SDK distribution (``vigil.sdk``) shares."""

from setuptools import find_packages, setup

FOLDERS = ("schemas", "producers", "worker")

setup(
    packages=[f"vigil.{name}" for name in find_packages(include=[f"{folder}*" for folder in FOLDERS])],
    package_dir={f"vigil.{folder}": folder for folder in FOLDERS},
)
