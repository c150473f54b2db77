"""The working tree's catalogue, for the suites' parameter lists.

asv runs this suite against the package installed from each commit under test, and its parameter lists must not
change with that commit, so the catalogue module and file are read by path from the checkout the suite lives in.
"""

import importlib.util
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]


def _load_catalogue_module():
    spec = importlib.util.spec_from_file_location("_worktree_catalogue", _ROOT / "sgemm" / "catalogue.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


catalogue = _load_catalogue_module()
_PATH = _ROOT / "sgemm" / "catalogue.toml"
KERNELS = catalogue.load_catalogue(_PATH, _ROOT / "kernels")
SIZES = catalogue.default_sizes(_PATH)
PRECISIONS = catalogue.precision_names(_PATH)
# The tracked architectures, then the architecture-specific targets kernels are built for (e.g. sm_90a).
GENERIC_ARCHITECTURES = catalogue.architectures(_PATH)
ARCHITECTURES = list(dict.fromkeys(GENERIC_ARCHITECTURES + [k.target for k in KERNELS.values() if k.target]))
SWEEP_KERNELS, SWEEP_SHAPES = catalogue.sweep(_PATH)
# The names kernels had before a rename stay parameters: a gate measures a renamed kernel under its old name at base,
# and the old name's history goes on.
FORMER_NAMES = [old for kernel in KERNELS.values() for old in kernel.renamed_from]
REFERENCE = catalogue.reference(_PATH)  # the commit the history's paired track times each kernel against
