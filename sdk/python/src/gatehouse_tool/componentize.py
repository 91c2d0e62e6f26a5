"""Builds a tool component: ``python -m gatehouse_tool.componentize app -o app.wasm``.

``app`` is the module that defines ``IncomingHandler = incoming_handler(tool)``. The component
targets ``gatehouse_tool/wit/tool.wit``, whose packages are read from the WIT the spin-sdk
package ships (installed with the wheel's ``[component]`` extra), and holds the project's own
modules (the ``*.py`` files beside the app), this package, fastjsonschema and each ``--with``
module. Nothing else from the environment is packed (not the project's virtualenv either), so
no other package's WIT is merged into the component's world. Everything it makes is under
``--build-dir`` (``build/``)."""

from __future__ import annotations

import argparse
import importlib
import importlib.resources
import shutil
import subprocess
import sys
from pathlib import Path

WORLD = "gatehouse:tool-sdk/tool"
RUNTIME_MODULES = ("gatehouse_tool", "fastjsonschema")


def _componentize_py(*args: str) -> None:
    runner = "import sys; from componentize_py import script; sys.argv[0] = 'componentize-py'; sys.exit(script())"
    subprocess.run([sys.executable, "-c", runner, *args], check=True)


def _module_path(name: str) -> Path:
    module = importlib.import_module(name)
    location = Path(module.__file__ or "")
    return location.parent if location.name == "__init__.py" else location


def build(app: str, output: Path, build_dir: Path, extra_modules: list[str]) -> None:
    try:
        spin_sdk_wit = _module_path("spin_sdk") / "wit"
    except ImportError:
        raise SystemExit(
            "spin-sdk is not installed: install this package's wheel with its [component] extra "
            "(docs/tools.md, \"Where the SDK packages come from\")"
        ) from None
    world = Path(str(importlib.resources.files("gatehouse_tool") / "wit" / "tool.wit"))
    wit = ["-d", str(spin_sdk_wit), "-d", str(world), "-w", WORLD]

    bindings = build_dir / "bindings"
    site = build_dir / "site"
    project = build_dir / "app"
    for made in (bindings, site, project):
        shutil.rmtree(made, ignore_errors=True)
    site.mkdir(parents=True)
    project.mkdir(parents=True)
    for module in Path(".").glob("*.py"):
        shutil.copy2(module, project / module.name)
    _componentize_py("-q", *wit, "bindings", str(bindings))
    for name in (*RUNTIME_MODULES, *extra_modules):
        source = _module_path(name)
        target = site / source.name
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, target)
    output.parent.mkdir(parents=True, exist_ok=True)
    paths = ["-p", str(project), "-p", str(bindings), "-p", str(site)]
    _componentize_py("-q", *wit, "componentize", app, *paths, "-o", str(output))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m gatehouse_tool.componentize", description=__doc__.split("\n\n")[0])
    parser.add_argument("app", help="the module that defines IncomingHandler")
    parser.add_argument("-o", "--output", type=Path, default=Path("app.wasm"))
    parser.add_argument("--build-dir", type=Path, default=Path("build"))
    parser.add_argument("--with", dest="modules", action="append", default=[], metavar="MODULE",
                        help="another module the tool imports at run time (pure Python)")
    arguments = parser.parse_args()
    build(arguments.app, arguments.output, arguments.build_dir, arguments.modules)


if __name__ == "__main__":
    main()
