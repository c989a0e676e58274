"""Install compiler/ and gpu/ inside the migx_explore namespace (docs/architecture.md: no generic
top-level `compiler` or `gpu` package lands in site-packages)."""

from setuptools import find_packages, setup

MAPPED = {"compiler": "migx_explore.compiler", "gpu": "migx_explore.gpu"}

packages = find_packages(include=["migx_explore", "migx_explore.*"])
package_dir = {}
for folder, name in MAPPED.items():
    package_dir[name] = folder
    packages += [name + sub[len(folder) :] for sub in find_packages(include=[folder, folder + ".*"])]

setup(packages=packages, package_dir=package_dir)
