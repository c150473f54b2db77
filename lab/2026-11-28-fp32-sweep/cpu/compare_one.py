# One build in its own process (NVRTC gave different PTX for one program after others in the same process):
# python compare_one.py TREE KERNEL ARCH -> registers, static shared bytes, spill stores, SASS digest, PTX digest.
import sys, hashlib
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cpu_check import text_sections, unmangled_ptx
from sgemm.catalogue import load_catalogue
from sgemm.measuring.resources import compile_offline, parse_ptxas_report
tree, name, arch = sys.argv[1:]
b = compile_offline(load_catalogue(Path(tree, "sgemm/catalogue.toml"), Path(tree, "kernels"))[name], arch)
u = parse_ptxas_report(b.log)
ptx = "\n".join(l for l in unmangled_ptx(b.ptx).splitlines() if not l.startswith(".global .align 4 .u32 "))
print(u.registers, u.shared_bytes, u.spill_store_bytes, hashlib.sha256(text_sections(b.cubin)).hexdigest()[:16], hashlib.sha256(ptx.encode()).hexdigest()[:16])
