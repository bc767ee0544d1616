"""Sphinx configuration of the mindspore_rl_buffer documentation site.

Build from the repository root (warnings are errors, every reference must resolve):

    sphinx-build -W -n --keep-going -b html docs build/docs
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import sys
from pathlib import Path

from mindspore import nn
from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util.inspect import stringify_signature
from sphinx.util.nodes import make_refnode

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# The package imports from the checkout even when it is not installed (``ops/`` is installed as
# ``mindspore_rl_buffer.ops``, so the site needs the editable install or ``pip install .``).
sys.path.insert(0, str(ROOT))
# Local extensions: ``cli_reference`` renders the ``mindspore-rl-buffer`` command line reference.
sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "mindspore_rl_buffer"
author = "mindspore_rl_buffer authors"
copyright = "mindspore_rl_buffer authors"


def _version() -> str:
    """The package version, read from its source so the build does not depend on the install."""
    for line in (ROOT / "mindspore_rl_buffer" / "__init__.py").read_text().splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("\"'")
    return "unknown"


release = version = _version()

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "cli_reference",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
templates_path = ["_templates"]
# Only the pages: the GPU kernel list (read by the tests), the extension's source, the
# templates and the build folder are not pages.
exclude_patterns = [
    "_build",
    "_ext",
    "_templates",
    "gpu/*.json",
    "**/.ipynb_checkpoints",
    "**/__pycache__",
]

# -- MyST -------------------------------------------------------------------------------------
myst_enable_extensions = ["colon_fence", "deflist"]
# [text](page.md#a-heading) links resolve to headings down to level 3.
myst_heading_anchors = 3

# -- API reference ----------------------------------------------------------------------------
# One page per public object, generated at build time into docs/api/generated/ (git-ignored).
autosummary_generate = True
autosummary_generate_overwrite = True
# A module's members are its __all__ (mindspore_rl_buffer.ops re-exports its operators).
autosummary_ignore_module_all = False
autosummary_imported_members = False
autodoc_member_order = "bysource"
# Signatures show the annotations; the Args sections give the types and defaults in words.
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autoclass_content = "class"
add_module_names = False

# Google-style sections, plus the MindSpore sections the docstrings use.
napoleon_google_docstring = True
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_custom_sections = ["Inputs", "Outputs", "Supported Platforms"]

# -- References -------------------------------------------------------------------------------
nitpicky = True
# No intersphinx: the CI machine has no network, so the inventories of MindSpore, numpy and
# Python cannot be downloaded and their types cannot resolve. Only those classes are ignored;
# every reference into this project and every link between pages must resolve.
nitpick_ignore_regex = [
    # MindSpore types in annotations and Args (mindspore.dtype, nn.Cell, a bare Tensor, ...).
    (r"py:class", r"(mindspore|nn)\..*"),
    (r"py:class", r"Tensor|Parameter"),
    # numpy types (numpy.ndarray, numpy.int64).
    (r"py:class", r"numpy\..*"),
    # The standard library in annotations (collections.abc.Mapping, os.PathLike, pathlib.Path,
    # contextlib.AbstractContextManager).
    (r"py:class", r"collections\.abc\..*"),
    (r"py:class", r"os\.PathLike|pathlib\.Path|Path|contextlib\..*"),
]


def _cell_signature(app, what, name, obj, options, signature, return_annotation):
    """A class's signature from its ``__init__`` where autodoc cannot show it.

    ``nn.Cell.__new__`` takes ``(*args, **kwargs)``, which autodoc would show for every buffer,
    and a dataclass field's ``default_factory`` shows as ``<factory>``, which is no Python.
    """
    if what != "class" or "__init__" not in vars(obj):
        return None
    if signature == "(*args, **kwargs)" or (signature and "<factory>" in signature):
        sig = inspect.signature(obj.__init__)
        fields = getattr(obj, "__dataclass_fields__", {})
        parameters = []
        for parameter in list(sig.parameters.values())[1:]:
            factory = getattr(fields.get(parameter.name), "default_factory", dataclasses.MISSING)
            if factory is not dataclasses.MISSING:
                parameter = parameter.replace(default=_Spelled(f"{factory.__name__}()"))
            parameters.append(parameter)
        sig = sig.replace(parameters=parameters, return_annotation=inspect.Signature.empty)
        return stringify_signature(sig), return_annotation
    return None


class _Spelled:
    """A default value shown as the code that makes it."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _constant_doc(app, what, name, obj, options, lines):
    """A re-exported constant's ``#:`` comment from the module that assigns it.

    autodoc reads ``#:`` comments of the module it documents; ``mindspore_rl_buffer.ops``
    imports its constants, so without this their pages would show ``int``'s docstring.
    """
    if what != "data" or not isinstance(obj, (int, float, str)):
        return
    attr = name.rsplit(".", 1)[-1]
    package = name.rsplit(".", 1)[0]
    for modname in sorted(m for m in sys.modules if m == package or m.startswith(package + ".")):
        try:
            docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
        except PycodeError:
            continue
        if ("", attr) in docs:
            lines[:] = list(docs[("", attr)])
            return
    lines[:] = []


_DOCUMENTED: dict[int, str] = {}


def _import(name: str) -> object:
    """The object a dotted name names, or ``None``."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for part in parts[cut:]:
                obj = getattr(obj, part)
        except AttributeError:
            return None
        return obj
    return None


def _resolve_reexport(app, env, node, contnode):
    """Resolve a reference to an object by the name it is documented under.

    Operators are documented where they are exported (``mindspore_rl_buffer.ops.insert_steps``,
    ``mindspore_rl_buffer.create_buffer``), while a docstring inside the defining module names
    them relatively (``insert_steps``) or by their defining module. A reference resolves only to
    the very object documented (same identity); anything else stays a warning.
    """
    if node.get("refdomain") != "py":
        return None
    domain = env.domains["py"]
    if not _DOCUMENTED:
        for fullname in domain.objects:
            obj = _import(fullname)
            if inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj):
                _DOCUMENTED.setdefault(id(obj), fullname)
    target = node["reftarget"].lstrip(".~")
    modname = node.get("py:module") or ""
    classname = node.get("py:class") or ""
    candidates = [target]
    parts = modname.split(".") if modname else []
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        if classname and cut == len(parts):
            candidates.insert(0, f"{prefix}.{classname}.{target}")
        candidates.append(f"{prefix}.{target}")
    for candidate in candidates:
        obj = _import(candidate)
        if obj is None or not (inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj)):
            continue
        fullname = _DOCUMENTED.get(id(obj))
        if fullname:
            entry = domain.objects[fullname]
            return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, fullname)
    # A short name in a summary table, read outside its module: the one documented object so named.
    if "." not in target:
        matches = [name for name in domain.objects if name.endswith("." + target)]
        if len(matches) == 1:
            entry = domain.objects[matches[0]]
            return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, matches[0])
    return None


def _skip_inherited_doc(app, what, name, obj, skip, options):
    """Skip a method that overrides MindSpore's without a docstring of its own: autodoc would show
    ``nn.Cell``'s text (``construct``: "Defines the computation to be performed...")."""
    if what == "class" and name in vars(nn.Cell) and inspect.isfunction(obj) and obj.__doc__ is None:
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_inherited_doc)
    app.connect("autodoc-process-signature", _cell_signature)
    app.connect("autodoc-process-docstring", _constant_doc)
    app.connect("missing-reference", _resolve_reexport)


# -- HTML -------------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"mindspore_rl_buffer {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
