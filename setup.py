"""Package discovery: every package under the five source folders, found, never listed.

One import namespace (``moagcn``) is mapped onto the top-level folders the project keeps
(``hw/`` is ``moagcn.hw``, and so on); setuptools cannot discover packages through such a
mapping from pyproject.toml alone, so this file walks the folders. Everything else is in
pyproject.toml.
"""

from setuptools import find_packages, setup

FOLDERS = {"moagcn": "moagcn", "moagcn.hw": "hw", "moagcn.sim": "sim", "moagcn.host": "host",
           "moagcn.synth": "synth"}


def packages() -> list[str]:
    found = []
    for name, folder in FOLDERS.items():
        found.append(name)
        found += [f"{name}.{sub}" for sub in find_packages(folder)
                  if not (name == "moagcn" and sub.split(".")[0] in FOLDERS.values())]
    return found + ["moagcn.data"]     # bundled datasets: data files, no code


setup(package_dir=FOLDERS, packages=packages())
