"""One import name, ``vigil``, mapped from the folders the design fixes: ``vigil.schemas`` is ``schemas/``,
``vigil.producers`` is ``producers/``, ``vigil.worker`` is ``worker/``. Nothing named ``worker`` or ``schemas`` lands in
site-packages, and ``vigil`` itself is a namespace that the SDK distribution (``vigil.sdk``) shares.

Every folder under the three whose name can be imported is a package, the data folders (``schemas/ddl``,
``worker/review/static``, ``worker/demo/data``) included, each with its files in ``package-data`` (pyproject.toml):
a data folder that is not in ``packages`` is a setuptools warning on every install. ``producers/sdk-dist`` (the SDK's
own build) cannot be imported and is left out."""

from setuptools import find_namespace_packages, setup

FOLDERS = ("schemas", "producers", "worker")

setup(
    packages=[f"vigil.{name}" for name in find_namespace_packages(include=[f"{folder}*" for folder in FOLDERS],
                                                                  exclude=["*__pycache__*"])
              if all(part.isidentifier() for part in name.split("."))],
    package_dir={f"vigil.{folder}": folder for folder in FOLDERS},
)
