"""asv suite: what each kernel costs on chip, per GPU architecture, compiled with NVRTC and no GPU.

A commit that makes a kernel use more registers, or spill, shows up on the site as a step in these tracks, on
every machine, whether or not its GPU is of that architecture.
"""

from . import under_test
from .worktree import ARCHITECTURES, GENERIC_ARCHITECTURES, KERNELS


class Resources:
    """ptxas's report for one kernel and architecture."""

    params = [[kernel.name for kernel in KERNELS.values() if not kernel.library], ARCHITECTURES]
    param_names = ["kernel", "arch"]
    timeout = 900  # setup_cache compiles every kernel for every architecture

    def setup_cache(self):
        try:
            from sgemm.catalogue import load_catalogue

            usage_table = under_test.resources().usage_table
        except ImportError as exc:
            return {"unavailable": f"the commit under test cannot compile offline: {exc}"}
        try:
            return usage_table(list(load_catalogue().values()), tuple(GENERIC_ARCHITECTURES))
        except (ImportError, RuntimeError) as exc:  # NVRTC's bindings or its library are missing on this box
            return {"unavailable": f"NVRTC is not usable here: {type(exc).__name__}: {exc}"}

    def setup(self, table, kernel, arch):
        if "unavailable" in table:
            raise NotImplementedError(table["unavailable"])
        if kernel in KERNELS and arch not in KERNELS[kernel].architectures(tuple(GENERIC_ARCHITECTURES)):
            built_for = KERNELS[kernel].target or "the generic architectures"
            raise NotImplementedError(f"{kernel} is built for {built_for}, not {arch}")
        usage = table.get((kernel, arch))
        if usage is None:
            raise NotImplementedError(f"this commit has no {kernel} kernel")
        if isinstance(usage, str):
            raise RuntimeError(usage)  # a compile error is a failure, not a skip
        self.usage = usage

    def track_registers(self, table, kernel, arch):
        return self.usage.registers

    track_registers.unit = "registers/thread"
    track_registers.pretty_name = "Resources: registers per thread"

    def track_shared_memory(self, table, kernel, arch):
        return self.usage.shared_bytes

    # "bytes": asv's graphs then draw the axis from zero, in B, kB or MB; the name says per what.
    track_shared_memory.unit = "bytes"
    track_shared_memory.pretty_name = "Resources: static shared memory per block"

    def track_local_memory(self, table, kernel, arch):
        """The stack frame: local memory per thread, spills included."""
        return self.usage.stack_bytes

    track_local_memory.unit = "bytes"
    track_local_memory.pretty_name = "Resources: local memory (stack frame) per thread"

    def track_spill_stores(self, table, kernel, arch):
        return self.usage.spill_store_bytes

    track_spill_stores.unit = "bytes"
    track_spill_stores.pretty_name = "Resources: spill stores per thread"

    def track_spill_loads(self, table, kernel, arch):
        return self.usage.spill_load_bytes

    track_spill_loads.unit = "bytes"
    track_spill_loads.pretty_name = "Resources: spill loads per thread"
