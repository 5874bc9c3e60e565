"""Which directories are which packages: the only part of the build pyproject.toml cannot say.

mam's packages live in six top-level directories (`mam/` holds the contract at the bottom; `broker/`,
`agents/`, `projector/`, `web/` and `mcp_server/` sit beside each other above it, as `mam.broker` and
so on). Every package below each root is found, not listed, so a new subpackage is in the wheel as it
is importable from an editable install (tests/codebase/test_wheel.py builds the wheel and compares).
"""

from setuptools import find_packages, setup

ROOTS = {
    "mam": "mam",
    "mam.broker": "broker",
    "mam.agents": "agents",
    "mam.projector": "projector",
    "mam.web": "web",
    "mam.mcp_server": "mcp_server",
}


def packages() -> list[str]:
    found = []
    for name, directory in ROOTS.items():
        found.append(name)
        found += [f"{name}.{sub}" for sub in find_packages(directory) if f"{name}.{sub}" not in ROOTS]
    return sorted(set(found))


setup(packages=packages(), package_dir=ROOTS)
